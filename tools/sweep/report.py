"""Scores an argen_sweep output folder and writes the Table-2-style report and plot.

  python tools/sweep/report.py SWEEP_OUT [--metadata tools/sweep/benchmark_prompts.jsonl]
      [--md SWEEP_OUT/report.md] [--plot SWEEP_OUT/quality_vs_sparsity.png] [--workers 2] [--no-plot]
  python tools/sweep/report.py MERGED_OUT --merge A/report.json B/report.json.gz [...]
      (no scoring: the tables and plot of several runs' per-image results, e.g. --shard parts)

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
import gzip
import json
import re
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
POLICY_ORDER = ["dense", "sliding_window", "streaming_llm", "h2o", "tova", "alisa", "diagonal", "diagonal_sink4",
                "grid_window", "diagonal_grid", "ssd", "line_evict"]


def decoding_mode(config: str) -> tuple[str, int]:
    """How a configuration decoded: argen_sweep names it "<policy>_<sparsity>_pw<N>" (parallel
    decoding, window N) or "_sw<N>" (speculative Jacobi decoding, window N); no suffix: ("", 0),
    one token at a time in raster order."""
    m = re.search(r"_(pw|sw)(\d+)$", config)
    return (m.group(1), int(m.group(2))) if m else ("", 0)


def parallel_window(config: str) -> int:
    """The parallel_window a configuration ran at (0: sequential or speculative)."""
    kind, window = decoding_mode(config)
    return window if kind == "pw" else 0


def speculative_window(config: str) -> int:
    """The speculative_window a configuration ran at (0: off)."""
    kind, window = decoding_mode(config)
    return window if kind == "sw" else 0


def row_label(policy: str, config: str) -> str:
    """A table row: the policy, and its parallel or speculative window when it has one."""
    kind, window = decoding_mode(config)
    return policy if not kind else f"{policy} {kind}{window}"


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


_METAS: list[dict | None] = []  # the benchmark metadata, set once per worker process


def _init_worker(metas: list[dict | None]) -> None:
    global _METAS
    _METAS = metas


def load_rgb(path: str) -> np.ndarray:
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB"))


def psnr_db(a: np.ndarray, b: np.ndarray) -> float:
    """PSNR of two RGB images of one shape in dB, capped at 99 (identical)."""
    a, b = a.astype(np.float64), b.astype(np.float64)
    mse = float(np.mean((a - b) ** 2)) if a.shape == b.shape else float("nan")
    return 99.0 if mse == 0 else min(99.0, 10 * float(np.log10(255.0 ** 2 / mse)))


def _score_group(job) -> list[tuple[int, bool, str, float | None]]:
    """One paired group: the images of every configuration with the same (prompt, seed,
    image index), and the path of their dense twin (or None). Loads each image once; only
    this group's images are in memory. -> [(position in the manifest, passed, reason, psnr)]"""
    members, dense_path = job
    dense = load_rgb(dense_path) if dense_path is not None else None
    out = []
    for pos, path, index in members:
        image = load_rgb(path)
        ok, reason = evaluate(_METAS[index], detect(image))
        out.append((pos, ok, reason, psnr_db(image, dense) if dense is not None else None))
    return out


def score_manifest(sweep_dir: str, entries: list[dict], metas: list[dict | None], workers: int) -> list[dict]:
    """Scores every manifest image and adds "psnr_vs_dense" (dB) where its dense twin (same
    prompt, seed and image index: the sweep is paired) is in the manifest. Pass rates on a
    few hundred images are noisy; this paired fidelity measure is not, and shows how far a
    policy drifts from dense. Work goes to the workers a paired group at a time (paths and
    prompt indices only), so memory stays bounded whatever the sweep's size."""
    groups: dict[tuple, list] = {}
    dense: dict[tuple, str] = {}
    for pos, e in enumerate(entries):
        index = e["prompt_index"]
        if index >= len(metas) or metas[index] is None:
            raise SystemExit(f"report: manifest names prompt {index}, the metadata has no such line")
        if metas[index]["prompt"] != e["prompt"]:
            raise SystemExit(f"report: prompt {index} is \"{e['prompt']}\" in the manifest but "
                             f"\"{metas[index]['prompt']}\" in the metadata: wrong --metadata?")
        path = os.path.join(sweep_dir, e["path"])
        if not os.path.isfile(path):
            raise SystemExit(f"report: {path} is in the manifest but missing")
        key = (index, e["seed"], e["image"])
        groups.setdefault(key, []).append((pos, path, index))
        if e["policy"] == "dense" and decoding_mode(e["config"])[0] == "":  # the sequential dense twin
            dense[key] = path
    jobs = [(members, dense.get(key)) for key, members in groups.items()]
    verdicts: list = [None] * len(entries)
    if workers > 1 and len(jobs) > 1:
        with mp.get_context("fork").Pool(workers, initializer=_init_worker, initargs=(metas,)) as pool:
            chunk = max(1, min(8, len(jobs) // (4 * workers)))
            for part in pool.imap_unordered(_score_group, jobs, chunksize=chunk):
                for pos, *v in part:
                    verdicts[pos] = v
    else:
        _init_worker(metas)
        for job in jobs:
            for pos, *v in _score_group(job):
                verdicts[pos] = v
    results = []
    for e, (ok, reason, psnr) in zip(entries, verdicts):
        r = dict(e, passed=ok, reason=reason)
        if psnr is not None:
            r["psnr_vs_dense"] = psnr
        results.append(r)
    return results


def summarize(results: list[dict]) -> dict:
    """config -> {policy, sparsity, images, overall, per_category, decode_s}."""
    by_config: dict[str, list[dict]] = {}
    for r in results:
        by_config.setdefault(r["config"], []).append(r)
    out = {}
    for config, rows in by_config.items():
        s = aggregate([(r["tag"], r["passed"]) for r in rows])
        out[config] = {"policy": row_label(rows[0]["policy"], config), "parallel_window": parallel_window(config),
                       "speculative_window": speculative_window(config),
                       "sparsity": rows[0]["sparsity"], "images": len(rows),
                       "overall": s["overall"],
                       "per_category": {t: {"accuracy": a, "images": n} for t, (a, n) in s["per_category"].items()},
                       "mean_decode_s": float(np.mean([r["decode_s"] for r in rows]))}
        psnr = [r["psnr_vs_dense"] for r in rows if "psnr_vs_dense" in r]  # 99: identical
        if psnr:
            out[config]["mean_psnr_vs_dense"] = float(np.mean(psnr))
    return out


def _policies(summary: dict) -> list[str]:
    """Row labels: the known policies in their order, then the others; after each policy its
    parallel windows, then its speculative windows, each in increasing order."""
    def order(label: str) -> tuple:
        base, _, mode = label.partition(" ")
        known = POLICY_ORDER.index(base) if base in POLICY_ORDER else len(POLICY_ORDER)
        kind, window = decoding_mode("_" + mode) if mode else ("", 0)
        return (known, base, ["", "pw", "sw"].index(kind), window)
    return sorted({c["policy"] for c in summary.values()}, key=order)


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


def _open_text(path: str, mode: str):
    """Text file, gzip-compressed where the name ends in .gz."""
    if path.endswith(".gz"):
        return gzip.open(path, mode + "t", encoding="utf-8")
    return open(path, mode, encoding="utf-8")


def write_report_json(path: str, summary: dict, results: list[dict], settings: dict | None) -> None:
    """One image a line (a 75k-image sweep is ~20 MB; name it .json.gz to compress)."""
    with _open_text(path, "w") as f:
        f.write('{"settings": ' + json.dumps(settings) + ',\n"configs": ' + json.dumps(summary, indent=1)
                + ',\n"images": [\n')
        for i, r in enumerate(results):
            f.write(json.dumps(r, sort_keys=True) + (",\n" if i + 1 < len(results) else "\n"))
        f.write("]}\n")


def load_report_json(path: str) -> dict:
    try:
        with _open_text(path, "r") as f:
            data = json.load(f)
    except (OSError, json.JSONDecodeError, EOFError) as e:
        raise SystemExit(f"report: --merge {path}: {e}")
    if not isinstance(data, dict) or not isinstance(data.get("images"), list):
        raise SystemExit(f"report: --merge {path}: not a report.json (no \"images\" list)")
    return data


def merge_reports(paths: list[str]) -> tuple[list[dict], dict | None]:
    """Per-image results of several reports (e.g. --shard parts, or a run and its
    continuation), one per (config, prompt, image): where two reports hold the same image
    the later one's is kept and counted. The image-changing settings must agree."""
    by_key: dict[tuple, dict] = {}
    settings = None
    duplicates = 0
    for path in paths:
        data = load_report_json(path)
        s = data.get("settings")
        if s is not None:
            if settings is not None and s != settings:
                diff = sorted(k for k in set(s) | set(settings) if s.get(k) != settings.get(k))
                raise SystemExit(f"report: --merge {path}: settings differ from the earlier reports' in {diff}")
            settings = s
        for r in data["images"]:
            key = (r["config"], r["prompt_index"], r["image"])
            duplicates += key in by_key
            by_key[key] = r
    if duplicates:
        print(f"report: --merge: {duplicates} images were in more than one report; kept the later", file=sys.stderr)
    results = sorted(by_key.values(), key=lambda r: (r["config"], r["prompt_index"], r["image"]))
    return results, settings


def write_done_list(path: str, results: list[dict], settings: dict | None) -> int:
    """"<config> <prompt index>" for every (configuration, prompt) whose images are all
    there: argen_sweep --exclude skips them (a continuation on a fresh machine)."""
    per_pair: dict[tuple, set] = {}
    for r in results:
        per_pair.setdefault((r["config"], r["prompt_index"]), set()).add(r["image"])
    want = (settings or {}).get("images_per_prompt") or max((len(v) for v in per_pair.values()), default=0)
    done = sorted(k for k, v in per_pair.items() if v == set(range(want)))
    with open(path, "w", encoding="utf-8") as f:
        for config, prompt in done:
            f.write(f"{config} {prompt}\n")
    return len(done)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("sweep_dir", help="argen_sweep --out folder (has manifest.jsonl); with --merge, where the "
                    "merged outputs go")
    ap.add_argument("--metadata", default=DEFAULT_METADATA, help="the benchmark JSONL the sweep ran")
    ap.add_argument("--md", help="markdown output [SWEEP_DIR/report.md]")
    ap.add_argument("--json", help="JSON output, gzip if it ends in .gz [SWEEP_DIR/report.json]")
    ap.add_argument("--plot", help="plot output [SWEEP_DIR/quality_vs_sparsity.png]")
    ap.add_argument("--no-plot", action="store_true")
    ap.add_argument("--title", default="Quality against decode KV sparsity")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--merge", nargs="+", metavar="REPORT_JSON",
                    help="no scoring: combine the per-image results of these report.json(.gz) files")
    ap.add_argument("--done-list", help="also write the complete (config, prompt) pairs here, for argen_sweep "
                    "--exclude")
    args = ap.parse_args(argv)
    if args.workers < 1:
        print("report: --workers must be >= 1", file=sys.stderr)
        return 2
    if args.merge:
        for path in args.merge:
            if not os.path.isfile(path):
                print(f"report: --merge {path} not found", file=sys.stderr)
                return 2
        os.makedirs(args.sweep_dir, exist_ok=True)
        results, settings = merge_reports(args.merge)
    else:
        manifest = os.path.join(args.sweep_dir, "manifest.jsonl")
        if not os.path.isfile(manifest):
            print(f"report: {manifest} not found (run argen_sweep --out {args.sweep_dir} first)", file=sys.stderr)
            return 2
        if not os.path.isfile(args.metadata):
            print(f"report: --metadata {args.metadata} not found", file=sys.stderr)
            return 2
        entries = load_jsonl(manifest)
        if any("class_id" in e for e in entries):
            print(f"report: {manifest} is a class-conditional model's sweep (class_id in its lines): its images "
                  "answer class ids, not the prompts' captions, so the caption scorer does not apply", file=sys.stderr)
            return 2
        settings_path = os.path.join(args.sweep_dir, "sweep_settings.json")
        settings = None
        if os.path.isfile(settings_path):
            with open(settings_path, encoding="utf-8") as f:
                settings = json.load(f)
        results = score_manifest(args.sweep_dir, entries, load_metadata(args.metadata), args.workers) if entries else []
    if not results:
        print("report: no images to report", file=sys.stderr)
        return 1
    summary = summarize(results)
    md_path = args.md or os.path.join(args.sweep_dir, "report.md")
    json_path = args.json or os.path.join(args.sweep_dir, "report.json")
    with open(md_path, "w", encoding="utf-8") as f:
        f.write(markdown(summary, args.title))
    write_report_json(json_path, summary, results, settings)
    print(open(md_path, encoding="utf-8").read())
    print(f"report: {len(results)} images; wrote {md_path}, {json_path}", file=sys.stderr)
    if args.done_list:
        n = write_done_list(args.done_list, results, settings)
        print(f"report: wrote {args.done_list} ({n} complete (config, prompt) pairs)", file=sys.stderr)
    if not args.no_plot:
        plot_path = args.plot or os.path.join(args.sweep_dir, "quality_vs_sparsity.png")
        plot(summary, plot_path, args.title)
        print(f"report: wrote {plot_path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
