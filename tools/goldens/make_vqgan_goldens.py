#!/usr/bin/env python3
"""Chameleon VQGAN decoder goldens for engine/vqgan, from tools/lumina_torch/vqgan.py
(checked module by module against Meta's chameleon/inference/vqgan.py by
`python -m tools.lumina_torch.check_vqgan`).

Two tiny random VQGANs of the Chameleon architecture (GroupNorm 32 forces
widths of at least 32):
  chameleon-tiny       the published topology: 5 levels (16x), 2 res blocks,
                       attention only in the middle block; widths all 32
  chameleon-tiny-attn  3 levels (4x), widths 32/32/64 (nin_shortcut), attention
                       blocks in the 16 px up level, tanh_out
Each is decoded on square and non-square grids (Lumina-mGPT decodes both).
Files under tests/goldens/vqgan/<variant>/:
  vqgan.yaml          the configuration in taming's layout (as Chameleon ships it)
  model.safetensors   the decode-path tensors (quantize.embedding, post_quant_conv,
                      decoder.*) by their vqgan.ckpt state_dict names, bfloat16
  golden.json         grids (height, width, codes row by row), file names, sums
  pixels.f32          decoder output before the uint8 conversion (float32, from
                      the bf16 weights widened to float32), [grid][c][y][x]
  rgb8                Chameleon's conversion (clamp, (x+1)/2*255, truncation), [grid][y][x][c]
With --ckpt also <variant>/vqgan.ckpt: the whole model as a Lightning-style
torch.save dict (for the PyTorch checkpoint reader; not committed).

Run: .venv/bin/python tools/goldens/make_vqgan_goldens.py [--ckpt]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tools.lumina_torch.vqgan import VQModel, chameleon_params, save_lightning_ckpt, to_uint8, write_yaml  # noqa: E402

OUT = ROOT / "tests" / "goldens" / "vqgan"

VARIANTS = {
    "chameleon-tiny": dict(
        params=chameleon_params(embed_dim=8, n_embed=64, z_channels=16, resolution=64, ch=32, ch_mult=(1, 1, 1, 1, 1),
                                num_res_blocks=2, attn_resolutions=()),
        tanh_out=False, grids=[(4, 4), (3, 5), (5, 2)], seed=11),
    "chameleon-tiny-attn": dict(
        params=chameleon_params(embed_dim=8, n_embed=64, z_channels=16, resolution=32, ch=32, ch_mult=(1, 1, 2),
                                num_res_blocks=2, attn_resolutions=(16,)),
        tanh_out=True, grids=[(8, 8), (4, 12), (6, 3)], seed=12),
}


def randomize(model: VQModel, gen: torch.Generator) -> None:
    """Default init for convs, plus random norm affines, conv biases and codebook so every term matters."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name and name.endswith(".weight"):
                p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith(".bias"):
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            elif name == "quantize.embedding.weight":
                p.copy_(torch.randn(p.shape, generator=gen))


def decode_path(state: dict) -> dict:
    return {k: v for k, v in state.items() if k.startswith(("decoder.", "quantize.", "post_quant_conv."))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ckpt", action="store_true", help="also write vqgan.ckpt (not committed)")
    args = ap.parse_args()
    torch.set_num_threads(1)
    for variant, spec in VARIANTS.items():
        out = OUT / variant
        out.mkdir(parents=True, exist_ok=True)
        params = dict(spec["params"])
        params["ddconfig"] = dict(params["ddconfig"], tanh_out=spec["tanh_out"])
        gen = torch.Generator().manual_seed(spec["seed"])
        torch.manual_seed(spec["seed"])
        model = VQModel(**params).eval()
        randomize(model, gen)
        # The golden uses the bf16-rounded weights, exactly what model.safetensors holds.
        with torch.no_grad():
            for p in model.parameters():
                p.copy_(p.to(torch.bfloat16).float())
        write_yaml(str(out / "vqgan.yaml"), params)
        save_file({k: v.to(torch.bfloat16).contiguous() for k, v in decode_path(model.state_dict()).items()},
                  str(out / "model.safetensors"), metadata={"format": "pt"})
        if args.ckpt:
            save_lightning_ckpt(str(out / "vqgan.ckpt"), model)
        grids, pixels, rgb = [], [], []
        for i, (h, w) in enumerate(spec["grids"]):
            codes = torch.randint(0, params["n_embed"], (h, w), generator=gen)
            if i == 0:
                codes[0, 0], codes[-1, -1] = 0, params["n_embed"] - 1  # both ends of the codebook
            with torch.no_grad():
                x = model.decode_code(codes[None]).float()
            grids.append({"height": h, "width": w, "codes": codes.flatten().tolist()})
            pixels.append(x[0].contiguous())
            rgb.append(to_uint8(x)[0].contiguous())
        (out / "pixels.f32").write_bytes(b"".join(p.numpy().astype("<f4").tobytes() for p in pixels))
        (out / "rgb8").write_bytes(b"".join(r.numpy().tobytes() for r in rgb))
        meta = {
            "generator": "tools/goldens/make_vqgan_goldens.py",
            "downsample": model.downsample, "grids": grids,
            "pixels_file": "pixels.f32", "rgb8_file": "rgb8",
            "pixels_sum": float(sum(p.double().sum() for p in pixels)),
            "rgb8_sum": int(sum(r.long().sum() for r in rgb)),
            "pixels_min": float(min(p.min() for p in pixels)), "pixels_max": float(max(p.max() for p in pixels)),
        }
        (out / "golden.json").write_text(json.dumps(meta, indent=1) + "\n")
        size = sum(f.stat().st_size for f in out.iterdir())
        print(f"{variant}: {len(grids)} grids, pixels in [{meta['pixels_min']:.3f}, {meta['pixels_max']:.3f}], "
              f"{size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
