#!/usr/bin/env python3
"""How far the bf16 path moves Emu3's vision decoder on the tiny random checkpoint, emulated on the CPU:
the bounds of engine/vq_cuda/tests/cuda_emu3vq_bf16_test.cc.

The GPU's bf16 path (engine/vq_cuda/bf16_emu3vq_network.h) stores every activation in bf16 (the residual
stream, GroupNorm / SpatialNorm outputs, conv outputs, q|k|v, the softmax's probabilities), takes bf16
weights, and accumulates in fp32; SpatialNorm's conv_y / conv_b outputs, the attention scores and conv_out
stay fp32. Emulated here on transformers' Emu3VQVAE (the CPU decoder's reference): both operands of every
conv and matmul rounded to bf16 (emu3_tf32_sensitivity.Tf32Gemms("bf16")) and every decoder module's
output rounded to bf16, except conv_out, conv_y and conv_b. The metrics are the test's: the per-pixel float
error |bf16 - fp32| / max(1, |fp32|) (max and RMS), and over the RGB8 bytes of the official conversion
(engine/vq/pixels.cc: (x + 1) / 2 * 255, clamped, truncated) the max level difference and the PSNR; on the
test's grids (the golden 3 x 5 grid and RandomGrid(h, w, 64, seed) for the listed sizes) and the spread
over more random grids. Then the same at the published tokenizer's shape (transformers' Emu3VQVAEConfig
defaults) with random weights drawn as the test's RandomSource draws them (conv weights uniform with
variance 1 / fan_in, norm gammas 1 +- 0.1, BatchNorm variances 1 +- 0.5, other vectors +- 0.05, codebook
+- 1; torch's generator, so the same distribution, not the same numbers) on 8 x 10 and 10 x 8 grids.

Run: /work/main/.venv/bin/python tools/goldens/emu3_bf16_sensitivity.py [--grids 100]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from emu3_tf32_sensitivity import GOLDEN_DIR, Tf32Gemms, load_vq, random_grid, round_operand  # noqa: E402

# The test's random grids: (rows, columns, seed), after the golden grid.
TEST_GRIDS = [(5, 3, 1), (3, 5, 2), (8, 8, 3), (1, 1, 4), (2, 7, 5)]
FP32_OUTPUTS = ("conv_out", "conv_y", "conv_b")  # stay fp32 on the GPU


def decode(vq, codes: np.ndarray, bf16: bool) -> np.ndarray:
    hooks = []
    if bf16:
        def store(_m, _i, out):
            if isinstance(out, torch.Tensor):
                return round_operand(out, "bf16")
            return out
        for name, m in vq.decoder.named_modules():
            if name and not name.split(".")[-1] in FP32_OUTPUTS:
                hooks.append(m.register_forward_hook(store))
    try:
        with torch.no_grad(), Tf32Gemms("bf16", enabled=bf16):
            out = vq.decode(torch.from_numpy(codes)[None])[0]
    finally:
        for h in hooks:
            h.remove()
    return out.numpy().astype(np.float64)


def rgb8(x: np.ndarray) -> np.ndarray:
    v = (x.astype(np.float32) + np.float32(1)) / np.float32(2) * np.float32(255)
    return np.clip(np.nan_to_num(v, nan=0.0), 0, 255).astype(np.uint8).astype(np.int64)


def metrics(got: list, want: list) -> dict:
    g = np.concatenate([x.reshape(-1) for x in got])
    w = np.concatenate([x.reshape(-1) for x in want])
    rel = np.abs(g - w) / np.maximum(1.0, np.abs(w))
    levels = np.abs(np.concatenate([rgb8(x).reshape(-1) for x in got]) -
                    np.concatenate([rgb8(x).reshape(-1) for x in want]))
    mse = float((levels.astype(np.float64) ** 2).mean())
    return {"max_rel": float(rel.max()), "rms_rel": float(np.sqrt((rel * rel).mean())),
            "max_level": int(levels.max()), "mean_level": float(levels.mean()),
            "psnr": 10 * np.log10(255.0 ** 2 / mse) if mse > 0 else float("inf")}


def line(m: dict) -> str:
    return (f"max rel {m['max_rel']:.3f}, rms rel {m['rms_rel']:.2e}; RGB8 max {m['max_level']} levels, "
            f"mean {m['mean_level']:.3f}, PSNR {m['psnr']:.1f} dB")


def published_vq(seed: int):
    """Emu3VQVAE at the published shape with RandomSource's weight distribution."""
    from transformers import Emu3VQVAEConfig
    from transformers.models.emu3.modeling_emu3 import Emu3VQVAE
    torch.manual_seed(seed)
    vq = Emu3VQVAE(Emu3VQVAEConfig()).eval()
    with torch.no_grad():
        for name, t in list(vq.named_parameters()) + list(vq.named_buffers()):
            if not t.is_floating_point():
                continue
            r = torch.rand_like(t) * 2 - 1
            vector = t.ndim == 1
            if name.endswith("running_var"):
                t.copy_(1 + 0.5 * r)
            elif vector and "norm" in name and name.endswith(".weight"):
                t.copy_(1 + 0.1 * r)
            elif vector:
                t.copy_(0.05 * r)
            elif "embedding" in name:
                t.copy_(r)
            else:
                fan_in = int(np.prod(t.shape[1:]))
                t.copy_(r * (3.0 / fan_in) ** 0.5)
    return vq


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grids", type=int, default=100, help="random grids (seeds 1000...) for the spread")
    args = ap.parse_args()
    torch.manual_seed(0)
    vq = load_vq()
    golden = json.loads((GOLDEN_DIR / "goldens.json").read_text())["pixels"]
    grids = [np.array(golden["codes"], dtype=np.int64).reshape(golden["height"], golden["width"])]
    grids += [random_grid(h, w, 64, seed) for h, w, seed in TEST_GRIDS]
    fp32 = [decode(vq, g, False) for g in grids]
    bf16 = [decode(vq, g, True) for g in grids]
    print(f"fp32 output: |x| max {max(np.abs(x).max() for x in fp32):.2f}")
    print("the test's grids together:", line(metrics(bf16, fp32)))
    for i, g in enumerate(grids):
        print(f"  grid {i} ({g.shape[0]} x {g.shape[1]}):", line(metrics([bf16[i]], [fp32[i]])))
    spread = {k: [] for k in ("max_rel", "rms_rel", "max_level", "mean_level", "psnr")}
    for seed in range(1000, 1000 + args.grids):
        g = random_grid(4, 6, 64, seed)
        for k, v in metrics([decode(vq, g, True)], [decode(vq, g, False)]).items():
            spread[k].append(v)
    print(f"{args.grids} random 4 x 6 grids, min / median / p90 / max (PSNR: max / median / p10 / min):")
    for k, v in spread.items():
        q = np.quantile(v, [0.0, 0.5, 0.9, 1.0] if k != "psnr" else [1.0, 0.5, 0.1, 0.0])
        print(f"  {k:10s} " + " ".join(f"{x:.3g}" for x in q))

    print("\npublished shape, random weights (weight seeds 1, 2), grids 8 x 10 and 10 x 8:")
    for seed in (1, 2):
        vq = published_vq(seed)
        rng = np.random.default_rng(seed)
        shape_grids = [rng.integers(0, 32768, size=s) for s in ((8, 10), (10, 8))]
        want = [decode(vq, g, False) for g in shape_grids]
        got = [decode(vq, g, True) for g in shape_grids]
        print(f"  weights {seed}: fp32 |x| max {max(np.abs(x).max() for x in want):.2f};", line(metrics(got, want)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
