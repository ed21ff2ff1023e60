#!/usr/bin/env python3
"""Writes the VQ-16 decoder goldens under tests/goldens/vq/ from the tiny checkpoints.

Run with the development Python:  .venv/bin/python tools/goldens/make_vq_goldens.py

For each tiny checkpoint (tests/goldens/tiny/<variant>/, written by
make_tiny_checkpoint.py) the gen_vision_model.* tensors are loaded, as float32,
into the PyTorch VQ-16 of tools/janus_torch/vq16.py (checked against the
official janus/models/vq_model.py), and a few fixed token grids are decoded with
decode_code, as the official generation script does. Files per variant:
  <variant>.json        grids (raster order), image size, file names, and sums of
                        the pixel arrays (a guard against truncated files)
  <variant>.pixels.f32  decoder output before the uint8 conversion, float32
                        little-endian, [grid][channel][y][x] (NCHW)
  <variant>.rgb8        the official conversion clip((x+1)/2*255, 0, 255) cast to
                        uint8 (truncation), [grid][y][x][channel] (HWC)
Deterministic: fixed grids and seeds.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Dict, List

import torch
from safetensors.torch import load_file

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
from janus_torch.vq16 import VQModel, load_from_janus_state_dict, to_uint8  # noqa: E402

TINY = ROOT / "tests" / "goldens" / "tiny"
OUT = ROOT / "tests" / "goldens" / "vq"
VARIANTS = {"tiny-mha": 4, "tiny-gqa-sharded": 2}  # variant -> number of grids


def load_state(ckpt: Path) -> Dict[str, torch.Tensor]:
    index = ckpt / "model.safetensors.index.json"
    files = sorted(set(json.loads(index.read_text())["weight_map"].values())) if index.exists() \
        else ["model.safetensors"]
    state: Dict[str, torch.Tensor] = {}
    for f in files:
        state.update(load_file(str(ckpt / f)))
    return state


def build_model(ckpt: Path) -> VQModel:
    p = json.loads((ckpt / "config.json").read_text())["gen_vision_config"]["params"]
    model = VQModel(codebook_size=p.get("codebook_size", p["image_token_size"]),
                    codebook_embed_dim=p.get("codebook_embed_dim", 8),
                    codebook_l2_norm=p.get("codebook_l2_norm", True), ch=p.get("ch", 128),
                    ch_mult=p.get("ch_mult", [1, 1, 2, 2, 4]), z_channels=p.get("z_channels", 256),
                    num_res_blocks=p.get("num_res_blocks", 2))
    missing, unexpected = load_from_janus_state_dict(model, load_state(ckpt), strict=False)
    # The tiny files leave out the training-only encoder and usage counter.
    missing = [k for k in missing if not k.startswith("encoder.") and k != "quantize.codebook_used"]
    if missing or unexpected:
        raise SystemExit(f"{ckpt}: missing {missing} unexpected {unexpected}")
    return model.eval()


def fixed_grids(count: int, grid: int, vocab: int, seed: int) -> List[List[int]]:
    n = grid * grid
    gen = torch.Generator().manual_seed(seed)
    grids = [
        [0] * n,                                            # one code everywhere
        [(7 * i + 3) % vocab for i in range(n)],            # a ramp over all codes
        torch.randint(0, vocab, (n,), generator=gen).tolist(),
        [vocab - 1 if (i // grid + i % grid) % 2 else 1 for i in range(n)],  # checkerboard incl. the last id
    ]
    return grids[:count]


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(1)
    for variant, count in VARIANTS.items():
        ckpt = TINY / variant
        model = build_model(ckpt)
        size = json.loads((ckpt / "config.json").read_text())["gen_vision_config"]["params"]["image_size"]
        grid = size // model.downsample
        grids = fixed_grids(count, grid, model.codebook_size, seed=len(variant))
        with torch.no_grad():
            pixels = model.decode_code(torch.tensor(grids, dtype=torch.int64).view(count, grid, grid)).float()
        rgb = to_uint8(pixels)
        (OUT / f"{variant}.pixels.f32").write_bytes(pixels.contiguous().numpy().astype("<f4").tobytes())
        (OUT / f"{variant}.rgb8").write_bytes(rgb.contiguous().numpy().tobytes())
        meta = {
            "checkpoint": f"tests/goldens/tiny/{variant}",
            "image_size": size, "token_grid": grid, "grids": grids,
            "pixels_file": f"{variant}.pixels.f32", "rgb8_file": f"{variant}.rgb8",
            "pixels_sum": float(pixels.double().sum()), "rgb8_sum": int(rgb.long().sum()),
            "pixels_min": float(pixels.min()), "pixels_max": float(pixels.max()),
        }
        (OUT / f"{variant}.json").write_text(json.dumps(meta, indent=1) + "\n")
        print(f"{variant}: {count} grids, pixels in [{meta['pixels_min']:.3f}, {meta['pixels_max']:.3f}]")


if __name__ == "__main__":
    main()
