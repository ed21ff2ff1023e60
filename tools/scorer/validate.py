"""Validates the scorer on rendered ground-truth scenes of the benchmark prompts.

  python -m tools.scorer.validate [--samples 4] [--workers 2]

For every prompt and sample seed, renders a scene that satisfies the prompt, then reports:
  positive accuracy  - the scorer passes the image against its own prompt (GenEval score of GT images),
  detection accuracy - the detected (shape, color) multiset equals the annotation exactly,
  rejection accuracy - the scorer fails the image against a same-category prompt that the
                       annotation contradicts (so a scorer that always passes scores 0 here).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
from collections import Counter

import numpy as np

from tools.scenes.grammar import spec_from_metadata
from tools.scenes.layout import scene_from_spec
from tools.scenes.render import render_scene
from tools.scorer.detect import detect
from tools.scorer.geneval import aggregate, evaluate, format_table

BENCHMARK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sweep", "benchmark_prompts.jsonl")


def load_metadata(path: str = BENCHMARK) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _check(args):
    index, sample, metas = args
    meta = metas[index]
    scene = scene_from_spec(spec_from_metadata(meta), seed=100003 * index + sample)
    image = render_scene(scene)
    found = detect(image)
    ok, reason = evaluate(meta, found)
    truth = Counter((o["shape"], o["color"]) for o in scene["objects"])
    detected = Counter((o["shape"], o["color"]) for o in found)
    # A contrasting prompt of the same category that the ground truth does not satisfy.
    rng = np.random.default_rng([index, sample])
    same = [j for j, m in enumerate(metas) if m["tag"] == meta["tag"] and j != index]
    rejected = None
    for j in rng.permutation(same):
        if not evaluate(metas[j], scene["objects"])[0]:
            rejected = not evaluate(metas[j], found)[0]
            break
    return meta["tag"], ok, reason, truth == detected, rejected, meta["prompt"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--metadata", default=BENCHMARK)
    args = ap.parse_args()
    metas = load_metadata(args.metadata)
    jobs = [(i, s, metas) for i in range(len(metas)) for s in range(args.samples)]
    with mp.get_context("fork").Pool(args.workers) as pool:
        rows = pool.map(_check, jobs, chunksize=16)
    summary = aggregate([(tag, ok) for tag, ok, *_ in rows])
    det = sum(r[3] for r in rows) / len(rows)
    rej = [r[4] for r in rows if r[4] is not None]
    print(format_table(summary))
    print(f"\nimages: {len(rows)}  positive accuracy (image passes its own prompt): "
          f"{sum(r[1] for r in rows) / len(rows):.4f}")
    print(f"detection accuracy (exact (shape, color) multiset): {det:.4f}")
    print(f"rejection accuracy (contradicting prompt fails): {sum(rej) / max(len(rej), 1):.4f} over {len(rej)}")
    failures = [r for r in rows if not r[1]]
    for tag, _, reason, _, _, prompt in failures[:10]:
        print(f"  FAIL [{tag}] {prompt}: {reason}")


if __name__ == "__main__":
    main()
