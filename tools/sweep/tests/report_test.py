"""tools/sweep/report.py on a synthetic sweep folder: one prompt per category, rendered
ground-truth scenes (tools/scenes) in one configuration and blank images in parts of
another. Checks the scores (blank images fail, the table's cells are the mean of the
per-category accuracies the scorer gives image by image), PSNR against dense, the table
layout, the plot,
and the errors (missing manifest -> exit 2, manifest prompt not in the metadata).

  python tools/sweep/tests/report_test.py      (exit 77: numpy/PIL missing, skipped)
"""

import json
import os
import shutil
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
sys.path.insert(0, ROOT)

try:
    import numpy as np
    from PIL import Image
except ImportError as e:  # CI without the dev venv
    print(f"report_test: skipped, {e} (needs numpy and pillow: scripts/dev-python.sh)")
    sys.exit(77)

from tools.scenes.grammar import spec_from_metadata  # noqa: E402
from tools.scenes.layout import scene_from_spec  # noqa: E402
from tools.scenes.render import render_scene  # noqa: E402
from tools.scorer.detect import detect  # noqa: E402
from tools.scorer.geneval import evaluate  # noqa: E402
from tools.sweep import report  # noqa: E402

METADATA = os.path.join(ROOT, "tools", "sweep", "benchmark_prompts.jsonl")


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def one_prompt_per_category(metas):
    first = {}
    for i, m in enumerate(metas):
        if m is not None and m["tag"] not in first:
            first[m["tag"]] = i
    return first


def write_sweep(out, metas, picks):
    """dense_0: ground truth for every prompt; diagonal_90: ground truth for the first
    half of the categories, blank (pale gray: no object) for the rest."""
    entries, truth_pass = [], {}
    tags = list(picks)
    for config, policy, sparsity in [("dense_0", "dense", 0.0), ("diagonal_90", "diagonal", 90.0)]:
        os.makedirs(os.path.join(out, config))
        for k, tag in enumerate(tags):
            index = picks[tag]
            meta = metas[index]
            image = render_scene(scene_from_spec(spec_from_metadata(meta), seed=index))
            blank = config == "diagonal_90" and k >= len(tags) // 2
            if blank:
                image = np.full_like(image, 235)
            name = f"{index:04d}_0.png"
            Image.fromarray(image).save(os.path.join(out, config, name))
            truth_pass[(config, tag)] = evaluate(meta, detect(image))[0]
            entries.append({"prompt_index": index, "tag": tag, "prompt": meta["prompt"], "policy": policy,
                            "sparsity": sparsity, "config": config, "seed": index, "image": 0,
                            "path": f"{config}/{name}", "decode_s": 1.5})
    with open(os.path.join(out, "manifest.jsonl"), "w", encoding="utf-8") as f:
        for e in entries:
            f.write(json.dumps(e) + "\n")
    return truth_pass


def main():
    metas = report.load_metadata(METADATA)
    picks = one_prompt_per_category(metas)
    check(len(picks) >= 4, f"the benchmark has categories {list(picks)}")
    tmp = tempfile.mkdtemp(prefix="report_test_")
    try:
        out = os.path.join(tmp, "sweep")
        truth_pass = write_sweep(out, metas, picks)
        tags = list(picks)
        gt = [truth_pass[("dense_0", t)] for t in tags]
        check(sum(gt) >= len(tags) - 1, f"the scorer fails ground truth too often: {dict(zip(tags, gt))}")
        for t in tags[len(tags) // 2:]:
            check(not truth_pass[("diagonal_90", t)], f"a blank image passed {t}")

        rc = report.main([out, "--workers", "1"])
        check(rc == 0, f"report exit {rc}")
        with open(os.path.join(out, "report.json"), encoding="utf-8") as f:
            summary = json.load(f)["configs"]
        for config in ("dense_0", "diagonal_90"):
            want = sum(truth_pass[(config, t)] for t in tags) / len(tags)
            got = summary[config]["overall"]
            check(abs(got - want) < 1e-9, f"{config}: overall {got}, want {want}")
            check(summary[config]["images"] == len(tags), f"{config}: {summary[config]['images']} images")
        md = open(os.path.join(out, "report.md"), encoding="utf-8").read()
        check("| policy | 0% | 90% |" in md, md)
        check(f"| dense | {summary['dense_0']['overall']:.3f} | - |" in md, md)
        check(f"| diagonal | - | {summary['diagonal_90']['overall']:.3f} |" in md, md)
        for t in tags:
            check(f"## {t}" in md, f"no table for {t}")
        # Paired fidelity: dense against itself is identical (99 dB); diagonal_90 has blank twins.
        check(summary["dense_0"]["mean_psnr_vs_dense"] == 99.0, summary["dense_0"])
        check(10.0 < summary["diagonal_90"]["mean_psnr_vs_dense"] < 99.0, summary["diagonal_90"])
        check("| dense | 99.0 | - |" in md, md)
        with Image.open(os.path.join(out, "quality_vs_sparsity.png")) as plot:
            check(plot.size[0] > 300 and plot.size[1] > 200, f"plot size {plot.size}")

        # Errors: no manifest -> 2; a manifest from another prompt set -> a message naming both prompts.
        check(report.main([os.path.join(tmp, "nowhere"), "--no-plot"]) == 2, "missing manifest")
        lines = open(os.path.join(out, "manifest.jsonl"), encoding="utf-8").read().splitlines()
        bad = json.loads(lines[0])
        bad["prompt"] = "a photo of a unicorn"
        with open(os.path.join(out, "manifest.jsonl"), "w", encoding="utf-8") as f:
            f.write(json.dumps(bad) + "\n")
        try:
            report.main([out, "--no-plot", "--workers", "1"])
            check(False, "a wrong prompt was accepted")
        except SystemExit as e:
            check("unicorn" in str(e) and "wrong --metadata" in str(e), str(e))
    finally:
        shutil.rmtree(tmp)
    print("report_test: ok")


if __name__ == "__main__":
    main()
