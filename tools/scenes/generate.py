"""Generates a training set of scenes: uint8 images, captions and ground-truth annotations.

  python -m tools.scenes.generate --n 60000 --out /tmp/scenes.npy --workers 16

Deterministic: scene i uses seed (base_seed, i) regardless of the worker count.
Training captions avoid the benchmark (tools/sweep/benchmark_prompts.jsonl).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import time

import numpy as np

from tools.scenes.grammar import HoldOut, sample_training_caption
from tools.scenes.layout import scene_from_spec
from tools.scenes.rich_caption import holdout_allows_scene, rich_caption
from tools.scenes.render import render_scene
from tools.scenes.vocab import IMAGE_SIZE

DEFAULT_BENCHMARK = os.path.join(os.path.dirname(__file__), "..", "sweep", "benchmark_prompts.jsonl")

_holdout = None
_images = None
_rich_fraction = 0.0


def _init(benchmark_path, images_path=None, n=0, rich_fraction=0.0):
    global _holdout, _images, _rich_fraction
    _holdout = HoldOut.from_jsonl(benchmark_path)
    _rich_fraction = rich_fraction
    if images_path is not None:
        _images = np.memmap(images_path, dtype=np.uint8, mode="r+", shape=(n, IMAGE_SIZE, IMAGE_SIZE, 3))


def make_one(args):
    base_seed, i = args
    rng = np.random.default_rng([base_seed, i])
    spec, text = sample_training_caption(rng, _holdout)
    scene = scene_from_spec(spec, int(rng.integers(2**31)))
    # Drawn only when rich captions are on, so the default data stay exactly as before.
    if _rich_fraction > 0 and rng.random() < _rich_fraction and holdout_allows_scene(scene, _holdout):
        text = rich_caption(text, scene)
        scene["rich"] = True
    scene["caption"] = text
    scene["tag"] = spec["tag"]
    return render_scene(scene), scene


def _make_into_memmap(args):
    image, scene = make_one(args)
    _images[args[1]] = image
    return scene


def generate(n: int, base_seed: int = 1, workers: int = 0, benchmark: str = DEFAULT_BENCHMARK,
             images_path: str | None = None, rich_fraction: float = 0.0):
    """Returns (images uint8 [n, 192, 192, 3], scenes with captions). With images_path the images
    are written by the workers straight into a memmap there (no pickling of pixels). A fraction
    rich_fraction of the captions (about: held-out colour pairs stay short) are rich captions
    (tools/scenes/rich_caption.py); the images do not depend on it."""
    if not 0.0 <= rich_fraction <= 1.0:
        raise ValueError(f"generate: rich_fraction {rich_fraction} is not in [0, 1]")
    workers = workers or os.cpu_count() or 1
    jobs = [(base_seed, i) for i in range(n)]
    if images_path is None:
        _init(benchmark, rich_fraction=rich_fraction)
        results = [make_one(j) for j in jobs]
        return np.stack([r[0] for r in results]), [r[1] for r in results]
    np.memmap(images_path, dtype=np.uint8, mode="w+", shape=(n, IMAGE_SIZE, IMAGE_SIZE, 3)).flush()
    with mp.get_context("fork").Pool(workers, initializer=_init,
                                     initargs=(benchmark, images_path, n, rich_fraction)) as pool:
        scenes = pool.map(_make_into_memmap, jobs, chunksize=256)
    images = np.memmap(images_path, dtype=np.uint8, mode="r", shape=(n, IMAGE_SIZE, IMAGE_SIZE, 3))
    return images, scenes


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=0)
    ap.add_argument("--benchmark", default=DEFAULT_BENCHMARK)
    ap.add_argument("--rich-captions", type=float, default=0.0, help="fraction of rich captions")
    ap.add_argument("--out", required=True, help="output .npy (images) and .jsonl (scenes) next to it")
    args = ap.parse_args()
    t0 = time.time()
    images, scenes = generate(args.n, args.seed, args.workers, args.benchmark,
                              images_path=os.path.splitext(args.out)[0] + ".u8", rich_fraction=args.rich_captions)
    np.save(args.out, np.asarray(images))
    with open(os.path.splitext(args.out)[0] + ".jsonl", "w", encoding="utf-8") as f:
        for s in scenes:
            f.write(json.dumps(s) + "\n")
    print(f"generated {len(scenes)} scenes in {time.time() - t0:.1f}s -> {args.out}")


if __name__ == "__main__":
    main()
