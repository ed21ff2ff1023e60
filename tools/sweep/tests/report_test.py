"""tools/sweep/report.py on a synthetic sweep folder: one prompt per category, rendered
ground-truth scenes (tools/scenes) in one configuration and blank images in parts of
another. Checks the scores (blank images fail, the table's cells are the mean of the
per-category accuracies the scorer gives image by image), PSNR against dense, the table
layout, the plot, 2 workers == 1, --merge of two parts (one gzip) == the whole, --done-list,
and the errors (missing manifest or a class-conditional sweep -> exit 2, manifest prompt not in
the metadata).

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


def check_parallel_windows():
    """Configurations at a parallel window (argen_sweep's "<config>_pw<N>") are rows of their
    own after their policy, never pooled with the sequential run; only sequential dense is the
    PSNR twin."""
    results = [{"config": c, "policy": p, "sparsity": 0.0, "tag": "colors", "passed": ok, "decode_s": 1.0}
               for c, p, ok in [("dense_0", "dense", True), ("dense_0_pw2", "dense", False),
                                ("dense_0_pw12", "dense", False), ("diagonal_90", "diagonal", True)]]
    summary = report.summarize(results)
    check(report._policies(summary) == ["dense", "dense pw2", "dense pw12", "diagonal"], report._policies(summary))
    check(summary["dense_0"]["overall"] == 1.0 and summary["dense_0_pw2"]["overall"] == 0.0, summary)
    check(summary["dense_0_pw12"]["parallel_window"] == 12 and summary["dense_0"]["parallel_window"] == 0, summary)
    table = report._table(summary, lambda c: f"{c['overall']:.1f}")
    check("| dense pw2 | 0.0 |" in table and "| dense | 1.0 |" in table, table)


def check_speculative_windows():
    """Speculative configurations ("<config>_sw<N>") are rows of their own after the parallel
    ones, never pooled with the sequential run nor taken as its PSNR twin."""
    results = [{"config": c, "policy": p, "sparsity": 0.0, "tag": "colors", "passed": ok, "decode_s": 1.0}
               for c, p, ok in [("dense_0_sw8", "dense", False), ("dense_0", "dense", True),
                                ("dense_0_sw4", "dense", False), ("dense_0_pw4", "dense", True)]]
    summary = report.summarize(results)
    check(report._policies(summary) == ["dense", "dense pw4", "dense sw4", "dense sw8"], report._policies(summary))
    check(summary["dense_0_sw4"]["speculative_window"] == 4 and summary["dense_0_sw4"]["parallel_window"] == 0,
          summary)
    table = report._table(summary, lambda c: f"{c['overall']:.1f}")
    check("| dense | 1.0 |" in table and "| dense sw8 | 0.0 |" in table, table)


def main():
    check_parallel_windows()
    check_speculative_windows()
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

        # Two workers: the same per-image results as one.
        check(report.main([out, "--workers", "2", "--no-plot", "--json", os.path.join(tmp, "w2.json")]) == 0, "w2")
        with open(os.path.join(out, "report.json"), encoding="utf-8") as f:
            full = json.load(f)
        with open(os.path.join(tmp, "w2.json"), encoding="utf-8") as f:
            check(json.load(f)["images"] == full["images"], "2 workers differ from 1")

        # --merge: two parts of the sweep (split by prompt, as --shard does), one gzip'd,
        # combine to the full run's tables; --done-list names the complete pairs.
        lines = open(os.path.join(out, "manifest.jsonl"), encoding="utf-8").read().splitlines()
        parts = []
        for k in range(2):
            part = os.path.join(tmp, f"part{k}")
            os.makedirs(part)
            mine = [json.loads(x) for x in lines if (json.loads(x)["prompt_index"] % 4 == 0) == (k == 0)]
            for e in mine:
                os.makedirs(os.path.join(part, e["config"]), exist_ok=True)
                shutil.copy(os.path.join(out, e["path"]), os.path.join(part, e["path"]))
            with open(os.path.join(part, "manifest.jsonl"), "w", encoding="utf-8") as f:
                f.write("".join(json.dumps(e) + "\n" for e in mine))
            name = os.path.join(part, "report.json" + (".gz" if k else ""))
            check(report.main([part, "--workers", "1", "--no-plot", "--json", name]) == 0, f"part {k}")
            parts.append(name)
        merged = os.path.join(tmp, "merged")
        done = os.path.join(tmp, "done.txt")
        check(report.main([merged, "--merge", *parts, "--done-list", done]) == 0, "merge")
        with open(os.path.join(merged, "report.json"), encoding="utf-8") as f:
            check(json.load(f)["configs"] == full["configs"], "merged tables differ from the full run's")
        check(open(os.path.join(merged, "report.md"), encoding="utf-8").read() == md, "merged report.md differs")
        check(os.path.isfile(os.path.join(merged, "quality_vs_sparsity.png")), "no merged plot")
        want = sorted(f"{e['config']} {e['prompt_index']}" for e in map(json.loads, lines))
        check(sorted(open(done, encoding="utf-8").read().split("\n")[:-1]) == want, "done list")
        # A part given twice: the later copy is kept, the tables do not change.
        check(report.main([merged, "--merge", *parts, parts[0], "--no-plot"]) == 0, "merge twice")
        with open(os.path.join(merged, "report.json"), encoding="utf-8") as f:
            check(json.load(f)["configs"] == full["configs"], "a duplicated part changed the tables")
        check(report.main([merged, "--merge", os.path.join(tmp, "nothing.json")]) == 2, "missing merge input")

        # Errors: no manifest -> 2; a class-conditional sweep (class_id) -> 2; a manifest from another
        # prompt set -> a message naming both prompts.
        check(report.main([os.path.join(tmp, "nowhere"), "--no-plot"]) == 2, "missing manifest")
        lines = open(os.path.join(out, "manifest.jsonl"), encoding="utf-8").read().splitlines()
        with open(os.path.join(out, "manifest.jsonl"), "w", encoding="utf-8") as f:
            f.write(json.dumps(dict(json.loads(lines[0]), class_id=3)) + "\n")
        check(report.main([out, "--no-plot", "--workers", "1"]) == 2, "a class-conditional sweep was scored")
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
