"""Compares two argen_sweep runs of the same grid, prompts and seeds that differ in one
setting, image by image: e.g. --kv-cache-dtype fp8 against auto.

  python tools/sweep/compare_runs.py BASE OTHER [--md OUT.md] [--json OUT.json]

BASE and OTHER are argen_sweep --out folders (manifest.jsonl, sweep_settings.json, the PNGs;
report.json or report.json.gz where tools/sweep/report.py scored them). Images pair on
(configuration, prompt index, image index). Per configuration: the images paired, the mean
PSNR of OTHER's image against BASE's (dB, 99 = identical), how many are identical, and with
both reports BASE's and OTHER's score (report.py's overall) with their difference and the
share of images whose pass/fail verdict agrees. Settings that make the runs unpaired
(model, prompts, seed, images per prompt, sampling, size) must match: exit 2 naming the
first that differs. Writes OTHER/compare.md (and --json) and prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from tools.sweep.report import load_jsonl, load_rgb, psnr_db  # noqa: E402  (the sweep's own readers and PSNR)

# Settings that change the random streams or the prompts: two runs differing in one are not paired.
PAIRING_KEYS = ["model", "prompts", "seed", "images_per_prompt", "cfg", "temperature", "top_k", "top_p", "size"]


def fail(message: str) -> None:
    print(f"compare_runs: {message}", file=sys.stderr)
    sys.exit(2)


def load_settings(run: str) -> dict:
    path = os.path.join(run, "sweep_settings.json")
    if not os.path.isfile(path):
        fail(f"{path} not found (not an argen_sweep --out folder?)")
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def load_report(run: str) -> dict | None:
    """config -> overall score and (config, prompt, image) -> passed, or None without a report."""
    import gzip

    for name in ("report.json", "report.json.gz"):
        path = os.path.join(run, name)
        if os.path.isfile(path):
            opener = gzip.open if name.endswith(".gz") else open
            with opener(path, "rt", encoding="utf-8") as f:
                data = json.load(f)
            verdicts = {(r["config"], r["prompt_index"], r["image"]): bool(r["passed"]) for r in data["images"]}
            return {"overall": {c: s["overall"] for c, s in data["configs"].items()}, "verdicts": verdicts}
    return None


def compare(base: str, other: str) -> dict:
    sb, so = load_settings(base), load_settings(other)
    for key in PAIRING_KEYS:
        if sb.get(key) != so.get(key):
            fail(f"setting \"{key}\" differs ({sb.get(key, 'absent')} in {base}, {so.get(key, 'absent')} in "
                 f"{other}): the runs are not paired")
    differing = {k: [sb.get(k), so.get(k)] for k in sorted(set(sb) | set(so)) if sb.get(k) != so.get(k)}
    entries = {}
    for run in (base, other):
        path = os.path.join(run, "manifest.jsonl")
        if not os.path.isfile(path):
            fail(f"{path} not found")
        entries[run] = {(e["config"], e["prompt_index"], e["image"]): e for e in load_jsonl(path)}
    reports = {run: load_report(run) for run in (base, other)}
    configs: dict[str, dict] = {}
    for key in sorted(set(entries[base]) & set(entries[other])):
        config = key[0]
        a = load_rgb(os.path.join(base, entries[base][key]["path"]))
        b = load_rgb(os.path.join(other, entries[other][key]["path"]))
        c = configs.setdefault(config, {"policy": entries[base][key]["policy"],
                                        "sparsity": entries[base][key]["sparsity"], "psnr": [], "agree": []})
        c["psnr"].append(psnr_db(b, a))
        if reports[base] and reports[other] and key in reports[base]["verdicts"] and key in reports[other]["verdicts"]:
            c["agree"].append(reports[base]["verdicts"][key] == reports[other]["verdicts"][key])
    if not configs:
        fail(f"no image of {other} has a twin in {base}")
    out = {}
    for config, c in configs.items():
        row = {"policy": c["policy"], "sparsity": c["sparsity"], "images": len(c["psnr"]),
               "mean_psnr": float(np.mean(c["psnr"])), "identical": int(sum(p >= 99.0 for p in c["psnr"]))}
        if reports[base] and reports[other] and config in reports[base]["overall"] and config in reports[other]["overall"]:
            row["score_base"] = reports[base]["overall"][config]
            row["score_other"] = reports[other]["overall"][config]
            row["score_delta"] = row["score_other"] - row["score_base"]
            if c["agree"]:
                row["verdicts_agree"] = float(np.mean(c["agree"]))
        out[config] = row
    return {"base": base, "other": other, "settings_differing": differing, "configs": out}


def markdown(result: dict) -> str:
    diff = ", ".join(f"{k}: {v[0] if v[0] is not None else 'absent'} -> {v[1] if v[1] is not None else 'absent'}"
                     for k, v in result["settings_differing"].items()) or "none"
    lines = [f"# {os.path.basename(result['other'].rstrip('/'))} against {os.path.basename(result['base'].rstrip('/'))}",
             "", f"Settings that differ: {diff}. Images pair on (configuration, prompt, image): the same prompt "
             "and seed. PSNR of each image against its twin (dB; 99 = identical).", "",
             "| configuration | images | mean PSNR | identical | score base | score other | delta | verdicts agree |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for config in sorted(result["configs"], key=lambda c: (result["configs"][c]["policy"] != "dense", c)):
        r = result["configs"][config]
        score = [f"{r[k]:.3f}" if k in r else "-" for k in ("score_base", "score_other")]
        delta = f"{r['score_delta']:+.3f}" if "score_delta" in r else "-"
        agree = f"{100 * r['verdicts_agree']:.1f}%" if "verdicts_agree" in r else "-"
        lines.append(f"| {config} | {r['images']} | {r['mean_psnr']:.1f} | {r['identical']} | {score[0]} | "
                     f"{score[1]} | {delta} | {agree} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("base", help="the reference run's argen_sweep --out folder (e.g. --kv-cache-dtype auto)")
    ap.add_argument("other", help="the run compared with it (e.g. --kv-cache-dtype fp8)")
    ap.add_argument("--md", help="markdown output [OTHER/compare.md]")
    ap.add_argument("--json", help="JSON output")
    args = ap.parse_args()
    result = compare(args.base, args.other)
    text = markdown(result)
    with open(args.md or os.path.join(args.other, "compare.md"), "w", encoding="utf-8") as f:
        f.write(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
    print(text, end="")


if __name__ == "__main__":
    main()
