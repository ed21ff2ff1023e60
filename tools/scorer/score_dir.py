"""Scores a folder of generated images against the benchmark metadata.

  python -m tools.scorer.score_dir IMAGES_DIR [--metadata tools/sweep/benchmark_prompts.jsonl] [--json out.json]

Images are named {prompt_index:04d}_{sample}.png (prompt_index = line number in the metadata, from 0).
Prints the GenEval-style table (per category and overall).
"""

from __future__ import annotations

import argparse
import json
import os
import re

import numpy as np
from PIL import Image

from tools.scorer.detect import detect
from tools.scorer.geneval import aggregate, evaluate, format_table
from tools.scorer.validate import BENCHMARK, load_metadata

NAME = re.compile(r"^(\d+)_(\d+)\.png$")


def score_dir(images_dir: str, metas: list[dict]):
    rows = []
    for name in sorted(os.listdir(images_dir)):
        m = NAME.match(name)
        if not m:
            continue
        index = int(m.group(1))
        if index >= len(metas):
            raise ValueError(f"score_dir: {name} names prompt {index}, metadata has {len(metas)}")
        image = np.asarray(Image.open(os.path.join(images_dir, name)).convert("RGB"))
        ok, reason = evaluate(metas[index], detect(image))
        rows.append({"file": name, "tag": metas[index]["tag"], "prompt": metas[index]["prompt"],
                     "passed": ok, "reason": reason})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("images_dir")
    ap.add_argument("--metadata", default=BENCHMARK)
    ap.add_argument("--json", help="write per-image results here")
    args = ap.parse_args()
    rows = score_dir(args.images_dir, load_metadata(args.metadata))
    if not rows:
        raise SystemExit(f"score_dir: no NNNN_K.png images in {args.images_dir}")
    summary = aggregate([(r["tag"], r["passed"]) for r in rows])
    print(format_table(summary))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"summary": summary, "images": rows}, f, indent=1)


if __name__ == "__main__":
    main()
