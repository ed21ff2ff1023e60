"""Samples benchmark images in PyTorch with CFG (official Janus sampling) and scores them.

  python -m tools.train.sample --model models/argen-scenes-v1 --out /tmp/samples [--per-prompt 4]
      [--every 1] [--sampling 5:1:0,3:1:0]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import time
from collections import defaultdict

import numpy as np
import torch
from PIL import Image

from tools.scorer.detect import detect
from tools.scorer.geneval import aggregate, evaluate, format_table
from tools.scorer.validate import BENCHMARK, load_metadata
from tools.train.fast_sampler import FastSampler
from tools.train.text_tokenizer import PromptEncoder, load_prompt_encoder
from tools.train.vq_train import decode_codes


@torch.no_grad()
def sample_prompts(model, vq, enc: PromptEncoder, prompts: list[str], per_prompt: int, grid: int,
                   cfg: float = 5.0, temperature: float = 1.0, top_k: int = 0, seed: int = 0,
                   max_rows: int = 1024):
    """-> uint8 images [len(prompts) * per_prompt, H, W, 3], ordered prompt-major.
    Prompts of equal token length share a batch (no padding, as the engine sees them)."""
    device = next(model.parameters()).device
    if device.type == "cuda":
        # The cuDNN attention backend builds a graph per key length, i.e. at every decode step
        # (tens of ms each): both device evaluations ran out of time on it. Flash/efficient don't.
        torch.backends.cuda.enable_cudnn_sdp(False)
    gen = torch.Generator(device=device).manual_seed(seed)
    ids = [enc.encode(p) for p in prompts]
    sampler = FastSampler(model)
    by_len = defaultdict(list)
    for i, p in enumerate(ids):
        for k in range(per_prompt):
            by_len[len(p)].append((i, k))
    out = [None] * (len(prompts) * per_prompt)
    use_amp = device.type == "cuda"
    for length, rows in sorted(by_len.items()):
        for start in range(0, len(rows), max_rows):
            chunk = rows[start:start + max_rows]
            cond = torch.tensor([ids[i] for i, _ in chunk], device=device)
            uncond = torch.tensor([enc.unconditional(ids[i]) for i, _ in chunk], device=device)
            tokens = sampler.generate(cond, uncond, grid * grid, cfg_weight=cfg, temperature=temperature,
                                      top_k=top_k, generator=gen)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=use_amp):
                images = decode_codes(vq, tokens, grid).cpu().numpy()
            for (i, k), img in zip(chunk, images):
                out[i * per_prompt + k] = img
    return np.stack(out)


def _score_one(args):
    meta, image = args
    return evaluate(meta, detect(image))


def score_images(metas: list[dict], images: np.ndarray, per_prompt: int, workers: int = 8):
    jobs = [(metas[i // per_prompt], images[i]) for i in range(len(images))]
    with mp.get_context("fork").Pool(workers) as pool:
        results = pool.map(_score_one, jobs, chunksize=8)
    rows = [(metas[i // per_prompt]["tag"], ok) for i, (ok, _) in enumerate(results)]
    return aggregate(rows), results


def spread(n_total: int, n_pick: int) -> list[int]:
    """n_pick indices evenly spread over range(n_total) (sample grids cover every category)."""
    return sorted({int(i) for i in np.linspace(0, n_total - 1, min(n_pick, n_total))})


def grid_png(images: np.ndarray, cols: int, path: str):
    images = np.asarray(images)
    missing = -len(images) % cols  # pad the last row with white tiles
    if missing:
        images = np.concatenate([images, np.full((missing,) + images.shape[1:], 255, np.uint8)])
    rows = [np.concatenate(list(images[r * cols:(r + 1) * cols]), axis=1) for r in range(len(images) // cols)]
    Image.fromarray(np.concatenate(rows, axis=0)).save(path)


def main():
    from tools.train.export import load
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--per-prompt", type=int, default=4, help="images per prompt (GenEval: 4)")
    ap.add_argument("--every", type=int, default=1, help="take every k-th benchmark prompt (subsample)")
    ap.add_argument("--sampling", default="5:1:0", help="comma-separated cfg:temperature:top_k variants")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--save-images", action="store_true", help="also write {index:04d}_{k}.png (first variant)")
    args = ap.parse_args()
    model, vq, cfg = load(args.model, args.device)
    enc = load_prompt_encoder(args.model)  # the model's own template (config.json argen_system_prompt)
    vp = cfg["gen_vision_config"]["params"]
    grid = vp["image_size"] // 2 ** (len(vp["ch_mult"]) - 1)
    metas = load_metadata(BENCHMARK)[::args.every]
    os.makedirs(args.out, exist_ok=True)
    results = {}
    for vi, variant in enumerate(args.sampling.split(",")):
        c, temp, top_k = variant.split(":")
        t0 = time.time()
        images = sample_prompts(model, vq, enc, [m["prompt"] for m in metas], args.per_prompt, grid, float(c),
                                float(temp), int(top_k), seed=args.seed)
        t1 = time.time()
        summary, _ = score_images(metas, images, args.per_prompt)
        results[variant] = dict(summary, images=len(images), sample_seconds=round(t1 - t0, 1))
        print(f"cfg={c} temperature={temp} top_k={top_k}: {len(images)} images sampled in {t1 - t0:.0f}s, "
              f"scored in {time.time() - t1:.0f}s\n" + format_table(summary), flush=True)
        tag = variant.replace(":", "_")
        pick = spread(len(images), 64)
        grid_png(images[pick], 8, os.path.join(args.out, f"samples_{tag}.png"))
        with open(os.path.join(args.out, f"samples_{tag}.txt"), "w") as f:
            f.write("\n".join(metas[i // args.per_prompt]["prompt"] for i in pick) + "\n")
        if args.save_images and vi == 0:
            for i, img in enumerate(images):
                Image.fromarray(img).save(os.path.join(args.out, f"{i // args.per_prompt:04d}_{i % args.per_prompt}.png"))
        with open(os.path.join(args.out, "summary.json"), "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
