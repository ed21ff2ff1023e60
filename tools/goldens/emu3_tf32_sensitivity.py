#!/usr/bin/env python3
"""How far TF32 GEMMs move Emu3's vision decoder on the tiny random checkpoint, emulated on the CPU.

The GPU decoder's TF32 mode (CudaEmu3VqDecoder, CudaEmu3VqOptions::tf32) changes one thing: the cuBLAS
handle's math mode (CUBLAS_TF32_TENSOR_OP_MATH), so every convolution GEMM (1x1 and im2col 3x3) and both
attention GEMMs (q.k and P.v) take their two operands at TF32 (10 explicit mantissa bits) and accumulate in
fp32; biases, GroupNorm, softmax and the pointwise kernels stay fp32. This script decodes with transformers'
Emu3VQVAE (the reference the CPU decoder is checked against) twice, fp32 and with both operands of every conv
and matmul rounded to TF32, on the grids of engine/vq_cuda/tests/cuda_emu3vq_decoder_test.cc
(Tf32StaysWithinItsBound: RandomGrid(4, 6, 64, 7) and (4, 6, 64, 8), reproduced here), and reports the test's
metric (max |tf32 - fp32| / max(1, |fp32|)) with the mean and RMS of the same per-pixel error and the
L2-relative error; for grid 0 each stage's cumulative error and the final error with rounding in that stage
alone, the GroupNorms' conditioning and the attention logits; and the spread over more random grids.
Rounding: nearest, ties away (cvt.rna.tf32.f32) and truncation (the tensor core reading an fp32 register's
top 19 bits), since which one cuBLAS's kernels use is not documented; and bf16 operands (3 mantissa bits
fewer) for the size of a precision bug the test's bounds must catch.

Causal padding is zeros, so rounding the 4-frame video's operands rounds frame 0's exactly as the GPU's
one-frame network does (emu3vq_weights.h); the fp32 decode is checked against the committed golden first.

Run: /work/main/.venv/bin/python tools/goldens/emu3_tf32_sensitivity.py [--grids 200]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

ROOT = Path(__file__).resolve().parents[2]
HF_DIR = ROOT / "tests/goldens/tiny/tiny-emu3-gen-hf"
GOLDEN_DIR = ROOT / "tests/goldens/tiny/emu3-goldens"


class Mt19937:
    """std::mt19937 (seeded as std::mt19937(seed))."""

    def __init__(self, seed: int):
        self.mt = [0] * 624
        self.mt[0] = seed & 0xFFFFFFFF
        for i in range(1, 624):
            self.mt[i] = (1812433253 * (self.mt[i - 1] ^ (self.mt[i - 1] >> 30)) + i) & 0xFFFFFFFF
        self.index = 624

    def __call__(self) -> int:
        if self.index >= 624:
            for i in range(624):
                y = (self.mt[i] & 0x80000000) | (self.mt[(i + 1) % 624] & 0x7FFFFFFF)
                self.mt[i] = self.mt[(i + 397) % 624] ^ (y >> 1) ^ (0x9908B0DF if y & 1 else 0)
            self.index = 0
        y = self.mt[self.index]
        self.index += 1
        y ^= y >> 11
        y ^= (y << 7) & 0x9D2C5680
        y ^= (y << 15) & 0xEFC60000
        y ^= y >> 18
        return y


def random_grid(h: int, w: int, codebook_size: int, seed: int) -> np.ndarray:
    """The test's RandomGrid: std::uniform_int_distribution<int32_t>(0, n - 1) over std::mt19937, as
    libstdc++ draws it for a power-of-two range below 2^32 (Lemire's product: (x * n) >> 32)."""
    assert codebook_size & (codebook_size - 1) == 0, "only the power-of-two draw is reproduced"
    rng = Mt19937(seed)
    return np.array([(rng() * codebook_size) >> 32 for _ in range(h * w)], dtype=np.int64).reshape(h, w)


def round_operand(x: torch.Tensor, mode: str) -> torch.Tensor:
    """mode "rna": TF32, nearest with ties away (cvt.rna.tf32.f32); "trunc": TF32 by truncation (the top
    19 bits of the fp32 word); "bf16": bfloat16 nearest (7 mantissa bits: a precision bug's size)."""
    if x.dtype != torch.float32:
        return x
    bits = x.contiguous().view(torch.int32)
    if mode == "bf16":
        return ((bits + 0x8000) & ~0xFFFF).view(torch.float32)
    if mode == "rna":  # on the sign-magnitude word: the magnitude rounds, ties away from zero
        bits = bits + 0x1000
    return (bits & ~0x1FFF).view(torch.float32)


class Tf32Gemms(TorchFunctionMode):
    """Rounds both operands of every convolution and matrix product (round_operand; bias untouched) while
    enabled."""

    GEMMS = {F.conv1d, F.conv2d, F.conv3d, torch.conv2d, torch.conv3d, F.linear, torch.matmul, torch.Tensor.matmul,
             torch.Tensor.__matmul__, torch.bmm, torch.Tensor.bmm}

    def __init__(self, mode: str, enabled: bool = True):
        super().__init__()
        self.mode, self.enabled, self.calls = mode, enabled, 0

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.enabled and func in self.GEMMS:
            self.calls += 1
            args = (round_operand(args[0], self.mode), round_operand(args[1], self.mode)) + tuple(args[2:])
        return func(*args, **kwargs)


def load_vq():
    from transformers import Emu3ForConditionalGeneration
    from transformers.utils import logging
    logging.set_verbosity_error()  # the image encoder is absent from the committed file (never read here)
    model = Emu3ForConditionalGeneration.from_pretrained(HF_DIR, torch_dtype=torch.float32,
                                                         attn_implementation="eager")
    return model.model.vqmodel.eval()


def stages(vq) -> list[str]:
    """The decoder's blocks in the order they run (as CudaEmu3VqDecoder::Network)."""
    d, names = vq.decoder, []
    names += [f"time_res_stack.{i}" for i in range(len(d.time_res_stack))]
    names += [f"time_conv.{i}" for i in range(len(d.time_conv))]
    names += ["conv_in", "middle_block.block_1", "middle_block.attn_1", "middle_block.block_2"]
    for level in reversed(range(len(d.up_block.up))):
        up = d.up_block.up[level]
        for i in range(len(up.block)):
            names.append(f"up_block.up.{level}.block.{i}")
            if len(up.attn):
                names.append(f"up_block.up.{level}.attn.{i}")
        if hasattr(up, "upsample"):
            names.append(f"up_block.up.{level}.upsample")
    return names + ["norm_out", "conv_out"]


def frame0(t: torch.Tensor) -> torch.Tensor:
    """Frame 0 of a stage's output: [2B, C, T, H, W] in the temporal stack, [B*T, C, H, W] after it (B = 1)."""
    return t[:, :, 0] if t.ndim == 5 else t[0]


def decode(vq, codes: np.ndarray, mode: str | None, record: dict | None = None, only: str | None = None,
           norms: list | None = None, logits: list | None = None) -> np.ndarray:
    """Frame 0, [3, H, W]. mode None: fp32; else TF32 operands (in stage `only` alone when given).
    record: each stage's frame-0 output by name; norms: each GroupNorm's worst-conditioned group; logits:
    each attention's largest |logit|, largest row spread and largest sum_c |q_c k_c| / sqrt(c)."""
    hooks = []
    tf32 = Tf32Gemms(mode or "rna", enabled=mode is not None and only is None)
    for name in stages(vq):
        m = vq.decoder.get_submodule(name)
        if record is not None:
            def keep(_m, _i, out, name=name):
                record[name] = frame0(out[0] if isinstance(out, tuple) else out).detach().clone()
            hooks.append(m.register_forward_hook(keep))
        if mode is not None and name == only:
            hooks.append(m.register_forward_pre_hook(lambda *_: setattr(tf32, "enabled", True)))
            hooks.append(m.register_forward_hook(lambda *_: setattr(tf32, "enabled", False)))
    if norms is not None:
        for name, m in vq.decoder.named_modules():
            if isinstance(m, torch.nn.GroupNorm):
                def condition(m, inputs, name=name):
                    x = frame0(inputs[0])
                    g = x.double().reshape(m.num_groups, -1)
                    # A group's output moves by |dx| / std: a perturbation relative to the group's
                    # magnitude (rms) is amplified rms / std times.
                    amp = (g.pow(2).mean(1).sqrt() / g.var(1, unbiased=False).add(m.eps).sqrt()).max()
                    norms.append((name, float(amp), g.shape[1]))
                hooks.append(m.register_forward_pre_hook(condition))
    if logits is not None:
        for name, m in vq.decoder.named_modules():
            if type(m).__name__ == "Emu3VQVAEAttentionBlock":
                def scores(m, inputs, name=name):
                    x = inputs[0][0].double()  # frame 0: [hw, c]
                    q = x @ m.q_proj.weight.double().T + m.q_proj.bias.double()
                    k = x @ m.k_proj.weight.double().T + m.k_proj.bias.double()
                    s = (q @ k.T) * m.scale
                    # A logit's TF32 error is about 2^-11 * sum_c |q_c k_c| * scale: the softmax's
                    # weights move by exp(that) - 1.
                    mag = (q.abs() @ k.abs().T) * m.scale
                    logits.append((name, float(s.abs().max()), float((s.max(1).values - s.min(1).values).max()),
                                   float(mag.max())))
                hooks.append(m.register_forward_pre_hook(scores))
    try:
        with torch.no_grad(), tf32:
            out = vq.decode(torch.from_numpy(codes)[None])[0]
        assert mode is None or tf32.calls > 0
    finally:
        for h in hooks:
            h.remove()
    return out.numpy()


def errors(got: np.ndarray, want: np.ndarray) -> dict:
    """The test's per-pixel error |got - want| / max(1, |want|): max, mean, RMS; and the L2-relative error."""
    got, want = got.astype(np.float64).reshape(-1), want.astype(np.float64).reshape(-1)
    e = np.abs(got - want) / np.maximum(1.0, np.abs(want))
    return {"max": float(e.max()), "mean": float(e.mean()), "rms": float(np.sqrt((e * e).mean())),
            "l2": float(np.linalg.norm(got - want) / np.linalg.norm(want))}


def quantiles(v) -> str:
    return " ".join(f"{x:.2e}" for x in np.quantile(v, [0.0, 0.5, 0.9, 1.0]))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grids", type=int, default=100, help="random 4 x 6 grids (seeds 1000...) for the spread")
    args = ap.parse_args()
    torch.manual_seed(0)
    vq = load_vq()
    golden = json.loads((GOLDEN_DIR / "goldens.json").read_text())["pixels"]
    codes = np.array(golden["codes"], dtype=np.int64).reshape(golden["height"], golden["width"])
    want = np.fromfile(GOLDEN_DIR / golden["file"], dtype="<f4")
    got = decode(vq, codes, None).reshape(-1)
    rel = float(np.linalg.norm(got - want) / np.linalg.norm(want))
    print(f"fp32 against the committed golden (3 x 5): L2-relative {rel:.2e}")
    assert rel < 1e-5, rel

    test_grids = [random_grid(4, 6, 64, 7), random_grid(4, 6, 64, 8)]
    # What the test's C++ (g++ 12, libstdc++) draws for these seeds, checked once by compiling RandomGrid.
    assert test_grids[0].reshape(-1)[:6].tolist() == [4, 14, 49, 20, 28, 62], test_grids[0]
    assert test_grids[1].reshape(-1)[:6].tolist() == [55, 0, 61, 15, 55, 24], test_grids[1]
    print("the test's grids (seeds 7, 8):", [g.reshape(-1).tolist() for g in test_grids])
    fp32 = [decode(vq, g, None) for g in test_grids]
    flat = lambda xs: np.concatenate([x.reshape(-1) for x in xs])  # noqa: E731
    print(f"fp32 output: |x| max {np.abs(flat(fp32)).max():.2f}, median {np.median(np.abs(flat(fp32))):.2f}")

    # Candidate amplifiers: GroupNorm over near-constant groups, softmax over large logits.
    norms, logits = [], []
    decode(vq, test_grids[0], None, norms=norms, logits=logits)
    print("grid 0: GroupNorm conditioning (worst group's rms / std; values a group), worst three:")
    for name, amp, n in sorted(norms, key=lambda t: -t[1])[:3]:
        print(f"  {name:40s} {amp:6.1f}  ({n})")
    print("grid 0: attention logits (max |logit|, max row spread, max sum_c |q_c k_c| / sqrt(c)):")
    for name, big, spread, mag in logits:
        print(f"  {name:40s} {big:8.1f} {spread:8.1f} {mag:8.1f}")

    def line(e: dict) -> str:
        return f"max {e['max']:.4f}  mean {e['mean']:.2e}  rms {e['rms']:.2e}  L2-relative {e['l2']:.2e}"

    for mode in ("rna", "trunc", "bf16"):
        tf32 = [decode(vq, g, mode) for g in test_grids]
        print(f"\n[{mode}] the test's metric on its two grids: {line(errors(flat(tf32), flat(fp32)))}")
        for i in range(len(test_grids)):
            print(f"  grid {i}: {line(errors(tf32[i], fp32[i]))}")
        if mode != "bf16":
            s32, stf = {}, {}
            decode(vq, test_grids[0], None, s32)
            decode(vq, test_grids[0], mode, stf)
            print("  grid 0 per stage: its output's cumulative error (L2-relative, max-abs, |output| max), and the "
                  "final max error with rounding in this stage alone")
            for name in stages(vq):
                a, b = s32[name].double(), stf[name].double()
                alone = errors(decode(vq, test_grids[0], mode, only=name), fp32[0])["max"]
                print(f"    {name:26s} {float((b - a).norm() / a.norm()):.2e}  {float((b - a).abs().max()):.2e}"
                      f"  {float(a.abs().max()):7.2f}   {alone:.2e}")

        # The spread over more grids (a bound must hold for any grid, not only the test's two).
        spread = {k: [] for k in ("max", "mean", "rms", "l2")}
        for seed in range(1000, 1000 + args.grids):
            g = random_grid(4, 6, 64, seed)
            for k, v in errors(decode(vq, g, mode), decode(vq, g, None)).items():
                spread[k].append(v)
        print(f"  {args.grids} random 4 x 6 grids, min / median / p90 / max:")
        for k, v in spread.items():
            print(f"    {k:4s} {quantiles(v)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
