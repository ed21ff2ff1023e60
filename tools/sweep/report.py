"""Scores an argen_sweep output folder and writes the Table-2-style report and plot.

  python tools/sweep/report.py SWEEP_OUT [--metadata tools/sweep/benchmark_prompts.jsonl]
      [--md SWEEP_OUT/report.md] [--plot SWEEP_OUT/quality_vs_sparsity.png] [--workers 2] [--no-plot]

Reads SWEEP_OUT/manifest.jsonl (written by argen_sweep), so exactly the images of
this sweep are scored, never stale files of an earlier one. Each image is scored by
the GenEval-style scorer (tools/scorer: detect + evaluate against the prompt's
metadata line). A configuration's score is GenEval's: the mean of the per-category
accuracies. Where dense ran, each image's PSNR against its dense twin (same prompt and
seed) is reported too: a paired, low-noise fidelity measure. Writes
  report.md    overall table (rows: policy, columns: sparsity) + one table per category
  report.json  per-configuration summaries and per-image results
  quality_vs_sparsity.png   overall score against sparsity, one line per policy
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402

from tools.scorer.detect import detect  # noqa: E402
from tools.scorer.geneval import aggregate, evaluate  # noqa: E402

DEFAULT_METADATA = os.path.join(ROOT, "tools", "sweep", "benchmark_prompts.jsonl")
CATEGORY_ORDER = ["single_object", "two_object", "counting", "colors", "position", "color_attr"]
POLICY_ORDER = ["dense", "sliding_window", "streaming_llm", "h2o", "tova", "alisa", "diagonal", "diagonal_sink4"]


def load_jsonl(path: str) -> list[dict]:
    rows = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                raise SystemExit(f"report: {path}:{n}: not JSON ({e})")
    return rows


def load_metadata(path: str) -> list[dict | None]:
    """Indexed by line number (blank lines keep their index, as argen_sweep counts them)."""
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) if line.strip() else None for line in f]


def _score_one(args) -> tuple[bool, str]:
    image_path, meta = args
    image = np.asarray(Image.open(image_path).convert("RGB"))
    return evaluate(meta, detect(image))


def score_manifest(sweep_dir: str, entries: list[dict], metas: list[dict | None], workers: int) -> list[dict]:
    jobs = []
    for e in entries:
        index = e["prompt_index"]
        if index >= len(metas) or metas[index] is None:
            raise SystemExit(f"report: manifest names prompt {index}, the metadata has no such line")
        if metas[index]["prompt"] != e["prompt"]:
            raise SystemExit(f"report: prompt {index} is \"{e['prompt']}\" in the manifest but "
                             f"\"{metas[index]['prompt']}\" in the metadata: wrong --metadata?")
        path = os.path.join(sweep_dir, e["path"])
        if not os.path.isfile(path):
            raise SystemExit(f"report: {path} is in the manifest but missing")
        jobs.append((path, metas[index]))
    if workers > 1 and len(jobs) > 1:
        with mp.Pool(workers) as pool:
            verdicts = pool.map(_score_one, jobs, chunksize=16)
    else:
        verdicts = [_score_one(j) for j in jobs]
    return [dict(e, passed=ok, reason=reason) for e, (ok, reason) in zip(entries, verdicts)]


def psnr_against_dense(sweep_dir: str, results: list[dict]) -> None:
    """Adds "psnr_vs_dense" (dB) to every result whose dense twin (same prompt, seed and
    image index: the sweep is paired) exists. Pass rates on a few hundred images are noisy;
    this paired fidelity measure is not, and shows how far a policy drifts from dense."""
    dense = {(r["prompt_index"], r["seed"], r["image"]): r for r in results if r["policy"] == "dense"}
    cache: dict[str, np.ndarray] = {}

    def load(path):
        if path not in cache:
            cache[path] = np.asarray(Image.open(os.path.join(sweep_dir, path)).convert("RGB"), dtype=np.float64)
        return cache[path]

    for r in results:
        twin = dense.get((r["prompt_index"], r["seed"], r["image"]))
        if twin is None:
            continue
        a, b = load(r["path"]), load(twin["path"])
        mse = float(np.mean((a - b) ** 2)) if a.shape == b.shape else float("nan")
        r["psnr_vs_dense"] = 99.0 if mse == 0 else min(99.0, 10 * float(np.log10(255.0 ** 2 / mse)))


def summarize(results: list[dict]) -> dict:
    """config -> {policy, sparsity, images, overall, per_category, decode_s}."""
    by_config: dict[str, list[dict]] = {}
    for r in results:
        by_config.setdefault(r["config"], []).append(r)
    out = {}
    for config, rows in by_config.items():
        s = aggregate([(r["tag"], r["passed"]) for r in rows])
        out[config] = {"policy": rows[0]["policy"], "sparsity": rows[0]["sparsity"], "images": len(rows),
                       "overall": s["overall"],
                       "per_category": {t: {"accuracy": a, "images": n} for t, (a, n) in s["per_category"].items()},
                       "mean_decode_s": float(np.mean([r["decode_s"] for r in rows]))}
        psnr = [r["psnr_vs_dense"] for r in rows if "psnr_vs_dense" in r]  # 99: identical
        if psnr:
            out[config]["mean_psnr_vs_dense"] = float(np.mean(psnr))
    return out


def _policies(summary: dict) -> list[str]:
    present = {c["policy"] for c in summary.values()}
    return [p for p in POLICY_ORDER if p in present] + sorted(present - set(POLICY_ORDER))


def _sparsities(summary: dict) -> list[float]:
    return sorted({c["sparsity"] for c in summary.values()})


def _pct(s: float) -> str:
    return f"{s:g}%"


def _table(summary: dict, value) -> list[str]:
    """Rows: policy; columns: sparsity; cells value(config summary) or '-' where not run."""
    sparsities = _sparsities(summary)
    cell = {(c["policy"], c["sparsity"]): c for c in summary.values()}
    lines = ["| policy | " + " | ".join(_pct(s) for s in sparsities) + " |",
             "|---|" + "---:|" * len(sparsities)]
    for p in _policies(summary):
        cells = [value(cell[(p, s)]) if (p, s) in cell else "-" for s in sparsities]
        lines.append(f"| {p} | " + " | ".join(cells) + " |")
    return lines


def markdown(summary: dict, title: str) -> str:
    images = sorted({c["images"] for c in summary.values()})
    lines = [f"# {title}", "",
             "GenEval-style score (mean of the per-category accuracies) of each policy (rows) at each "
             "decode-KV sparsity (columns); dense attends everything and runs once, at 0%. "
             f"Images per configuration: {', '.join(map(str, images))} (paired: the same prompts and seeds "
             "in every configuration).", "", "## Overall", ""]
    lines += _table(summary, lambda c: f"{c['overall']:.3f}")
    tags = {t for c in summary.values() for t in c["per_category"]}
    for tag in [t for t in CATEGORY_ORDER if t in tags] + sorted(tags - set(CATEGORY_ORDER)):
        lines += ["", f"## {tag}", ""]
        lines += _table(summary, lambda c, t=tag: f"{c['per_category'][t]['accuracy']:.3f}"
                        if t in c["per_category"] else "-")
    if any("mean_psnr_vs_dense" in c for c in summary.values()):
        lines += ["", "## Mean PSNR against dense (dB; the same prompt and seed; 99 = identical)", ""]
        lines += _table(summary, lambda c: f"{c['mean_psnr_vs_dense']:.1f}" if "mean_psnr_vs_dense" in c else "-")
    lines += ["", "## Mean decode wall time per request (s, shared with its batch)", ""]
    lines += _table(summary, lambda c: f"{c['mean_decode_s']:.2f}")
    return "\n".join(lines) + "\n"


def plot(summary: dict, path: str, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8.5, 4.5))
    for p in _policies(summary):
        points = sorted((c["sparsity"], c["overall"]) for c in summary.values() if c["policy"] == p)
        if p == "dense":
            ax.axhline(points[0][1], color="black", linestyle="--", linewidth=1, label="dense")
            continue
        xs, ys = zip(*points)
        ax.plot(xs, ys, marker="o", label=p, linewidth=2.2 if p.startswith("diagonal") else 1.2)
    ax.set_xlabel("decode KV sparsity (%)")
    ax.set_ylabel("GenEval-style score (overall)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # outside: never over the data
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweep_dir", help="argen_sweep --out folder (has manifest.jsonl)")
    ap.add_argument("--metadata", default=DEFAULT_METADATA, help="the benchmark JSONL the sweep ran")
    ap.add_argument("--md", help="markdown output [SWEEP_DIR/report.md]")
    ap.add_argument("--json", help="JSON output [SWEEP_DIR/report.json]")
    ap.add_argument("--plot", help="plot output [SWEEP_DIR/quality_vs_sparsity.png]")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--title", default="Quality against decode KV sparsity")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    manifest = os.path.join(args.sweep_dir, "manifest.jsonl")
    if not os.path.isfile(manifest):
        print(f"report: {manifest} not found (run argen_sweep --out {args.sweep_dir} first)", file=sys.stderr)
        return 2
    if not os.path.isfile(args.metadata):
        print(f"report: --metadata {args.metadata} not found", file=sys.stderr)
        return 2
    if args.workers < 1:
        print("report: --workers must be >= 1", file=sys.stderr)
        return 2
    entries = load_jsonl(manifest)
    if not entries:
        print(f"report: {manifest} lists no images", file=sys.stderr)
        return 1
    results = score_manifest(args.sweep_dir, entries, load_metadata(args.metadata), args.workers)
    psnr_against_dense(args.sweep_dir, results)
    summary = summarize(results)
    md_path = args.md or os.path.join(args.sweep_dir, "report.md")
    json_path = args.json or os.path.join(args.sweep_dir, "report.json")
    with open(md_path, "w", encoding="utf-8") as f:
        f.write(markdown(summary, args.title))
    with open(json_path, "w", encoding="utf-8") as f:
        json.dump({"configs": summary, "images": results}, f, indent=1)
    print(open(md_path, encoding="utf-8").read())
    print(f"report: wrote {md_path}, {json_path}", file=sys.stderr)
    if not args.no_plot:
        plot_path = args.plot or os.path.join(args.sweep_dir, "quality_vs_sparsity.png")
        plot(summary, plot_path, args.title)
        print(f"report: wrote {plot_path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
