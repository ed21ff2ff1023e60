#!/usr/bin/env python3
"""Writes a random-weight Janus-Pro checkpoint in the layout deepseek-ai publishes (torch.save .bin).

For load and serving tests of the PyTorch reader where the real weights cannot be downloaded:

  python3 tools/convert/make_janus_pro_bin.py --size 7B --out DIR    # 2 shards + index, ~14.8 GB, as Janus-Pro-7B
  python3 tools/convert/make_janus_pro_bin.py --size 1B --out DIR    # one pytorch_model.bin, ~4.2 GB, as Janus-Pro-1B
  python3 tools/convert/make_janus_pro_bin.py --size tiny --out DIR  # tiny-mha's weights, 2 shards (KBs)
  python3 tools/convert/make_janus_pro_bin.py --size 7B --format safetensors --out DIR  # one model.safetensors

Runs with any Python that has torch (the device's python3, or .venv/bin/python).
config.json is the published one for 7B / 1B (tiny: tests/goldens/tiny/tiny-mha's),
tokenizer.json the tiny test tokenizer (its ids fit every vocab). Names and shapes
are the official ones (janus/models: the Llama decoder, lm_head, gen_embed,
gen_aligner, gen_head, the VQ-16 model with its encoder and codebook_used counter,
aligner); the understanding-only SigLIP tower has the module names and the
ViT-L/16-384 shapes of timm's model and is never read by generation. Weights are
random BF16 (scaled by 1/sqrt(fan_in), norm weights near 1), made on the GPU
when there is one. Shards are split by size as save_pretrained splits them
(contiguous runs of the state dict; the 7B split puts ~10 GB in the first).
"""

from __future__ import annotations

import argparse
import collections
import json
import shutil
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "goldens" / "tiny" / "tiny-mha"

SIZES = {
    "7B": dict(hidden=4096, intermediate=11008, layers=30, heads=32, shards=2),
    "1B": dict(hidden=2048, intermediate=5632, layers=24, heads=16, shards=1),
}


def published_config(hidden: int, intermediate: int, layers: int, heads: int) -> dict:
    """deepseek-ai/Janus-Pro-{1B,7B}/config.json (keys and values as published)."""
    return {
        "aligner_config": {"cls": "MlpProjector", "model_type": "aligner",
                           "params": {"depth": 2, "input_dim": 1024, "n_embed": hidden, "projector_type": "mlp_gelu"}},
        "gen_aligner_config": {"cls": "MlpProjector", "model_type": "gen_aligner",
                               "params": {"depth": 2, "input_dim": 8, "n_embed": hidden, "projector_type": "mlp_gelu"}},
        "gen_head_config": {"cls": "vision_head", "model_type": "gen_head",
                            "params": {"image_token_embed": hidden, "image_token_size": 16384, "n_embed": hidden}},
        "gen_vision_config": {"cls": "VQ-16", "model_type": "gen_vision",
                              "params": {"image_token_size": 16384, "n_embed": 8}},
        "language_config": {"hidden_size": hidden, "intermediate_size": intermediate,
                            "max_position_embeddings": 16384, "model_type": "llama", "num_attention_heads": heads,
                            "num_hidden_layers": layers, "num_key_value_heads": heads, "torch_dtype": "bfloat16",
                            "vocab_size": 102400},
        "model_type": "multi_modality",
        "torch_dtype": "bfloat16",
        "transformers_version": "4.33.1",
        "vision_config": {"cls": "CLIPVisionTower", "model_type": "vision",
                          "params": {"image_size": 384, "model_name": "siglip_large_patch16_384",
                                     "select_feature": "same", "select_layer": -1}},
    }


def shapes(hidden: int, intermediate: int, layers: int, heads: int) -> "collections.OrderedDict[str, tuple]":
    """Every tensor of the official state dict, in the order the official model registers them."""
    s = collections.OrderedDict()
    # Understanding: SigLIP-L/16 at 384 px (timm VisionTransformer with an attention-pool head) and the aligner.
    v, vm = 1024, 4096
    t = "vision_model.vision_tower."
    s[t + "pos_embed"] = (1, 576, v)
    s[t + "patch_embed.proj.weight"] = (v, 3, 16, 16)
    s[t + "patch_embed.proj.bias"] = (v,)
    for i in range(24):
        b = f"{t}blocks.{i}."
        for n, shape in [("norm1.weight", (v,)), ("norm1.bias", (v,)), ("attn.qkv.weight", (3 * v, v)),
                         ("attn.qkv.bias", (3 * v,)), ("attn.proj.weight", (v, v)), ("attn.proj.bias", (v,)),
                         ("norm2.weight", (v,)), ("norm2.bias", (v,)), ("mlp.fc1.weight", (vm, v)),
                         ("mlp.fc1.bias", (vm,)), ("mlp.fc2.weight", (v, vm)), ("mlp.fc2.bias", (v,))]:
            s[b + n] = shape
    s[t + "norm.weight"], s[t + "norm.bias"] = (v,), (v,)
    p = t + "attn_pool."
    for n, shape in [("latent", (1, 1, v)), ("q.weight", (v, v)), ("q.bias", (v,)), ("kv.weight", (2 * v, v)),
                     ("kv.bias", (2 * v,)), ("proj.weight", (v, v)), ("proj.bias", (v,)), ("norm.weight", (v,)),
                     ("norm.bias", (v,)), ("mlp.fc1.weight", (vm, v)), ("mlp.fc1.bias", (vm,)),
                     ("mlp.fc2.weight", (v, vm)), ("mlp.fc2.bias", (v,))]:
        s[p + n] = shape
    s["aligner.layers.0.weight"], s["aligner.layers.0.bias"] = (hidden, v), (hidden,)
    s["aligner.layers.2.weight"], s["aligner.layers.2.bias"] = (hidden, hidden), (hidden,)
    # Generation: VQ-16 (official architecture, encoder included), then the rest.
    sys.path.insert(0, str(ROOT / "tools"))
    from janus_torch.vq16 import VQModel  # noqa: E402
    with torch.device("meta"):
        vq = VQModel()
    for k, tensor in vq.state_dict().items():
        s["gen_vision_model." + k] = tuple(tensor.shape)
    s["gen_embed.weight"] = (16384, 8)
    s["gen_aligner.layers.0.weight"], s["gen_aligner.layers.0.bias"] = (hidden, 8), (hidden,)
    s["gen_aligner.layers.2.weight"], s["gen_aligner.layers.2.bias"] = (hidden, hidden), (hidden,)
    s["gen_head.output_mlp_projector.weight"] = (hidden, hidden)
    s["gen_head.output_mlp_projector.bias"] = (hidden,)
    s["gen_head.vision_head.weight"], s["gen_head.vision_head.bias"] = (16384, hidden), (16384,)
    # The Llama decoder and its head.
    lm = "language_model."
    s[lm + "model.embed_tokens.weight"] = (102400, hidden)
    for i in range(layers):
        b = f"{lm}model.layers.{i}."
        s[b + "self_attn.q_proj.weight"] = (hidden, hidden)
        s[b + "self_attn.k_proj.weight"] = (hidden, hidden)
        s[b + "self_attn.v_proj.weight"] = (hidden, hidden)
        s[b + "self_attn.o_proj.weight"] = (hidden, hidden)
        s[b + "mlp.gate_proj.weight"] = (intermediate, hidden)
        s[b + "mlp.up_proj.weight"] = (intermediate, hidden)
        s[b + "mlp.down_proj.weight"] = (hidden, intermediate)
        s[b + "input_layernorm.weight"] = (hidden,)
        s[b + "post_attention_layernorm.weight"] = (hidden,)
    s[lm + "model.norm.weight"] = (hidden,)
    s[lm + "lm_head.weight"] = (102400, hidden)
    return s


def random_tensor(name: str, shape: tuple, device: str, gen: torch.Generator) -> torch.Tensor:
    last = name.rsplit(".", 2)
    is_norm = len(last) >= 2 and "norm" in last[-2] and last[-1] == "weight"
    if name.endswith("codebook_used"):
        return torch.zeros(shape, dtype=torch.float32)
    if is_norm:
        return torch.ones(shape, dtype=torch.bfloat16)
    t = torch.empty(shape, dtype=torch.bfloat16, device=device)
    if name.endswith(".bias"):
        t.normal_(0.0, 0.02, generator=gen)
    else:
        fan_in = 1
        for d in shape[1:]:
            fan_in *= d
        t.normal_(0.0, 1.0 / max(fan_in, 1) ** 0.5, generator=gen)
    return t.cpu()


def split(names: list, sizes: dict, shards: int, first_fraction: float) -> list:
    """Contiguous runs of the state dict; the first holds about first_fraction of the bytes."""
    if shards == 1:
        return [names]
    total = sum(sizes.values())
    out, part, acc = [], [], 0
    for n in names:
        if len(out) < shards - 1 and part and acc + sizes[n] > total * first_fraction:
            out.append(part)
            part, acc = [], 0
        part.append(n)
        acc += sizes[n]
    out.append(part)
    return out


def save(state: dict, path: Path) -> None:
    t0 = time.time()
    torch.save(state, path)
    print(f"  {path.name}: {path.stat().st_size / 1e9:.2f} GB in {time.time() - t0:.1f} s", flush=True)


def save_safetensors(state: dict, path: Path) -> None:
    """The safetensors layout (8-byte little-endian header length, JSON header, the tensors' bytes), written
    directly so no safetensors package is needed on the device."""
    t0 = time.time()
    dtypes = {torch.bfloat16: "BF16", torch.float32: "F32", torch.float16: "F16", torch.int64: "I64"}
    header, offset = {}, 0
    for n, t in state.items():
        nbytes = t.numel() * t.element_size()
        header[n] = {"dtype": dtypes[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + nbytes]}
        offset += nbytes
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for t in state.values():
            f.write(t.contiguous().view(torch.uint8).numpy().tobytes())
    print(f"  {path.name}: {path.stat().st_size / 1e9:.2f} GB in {time.time() - t0:.1f} s", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", choices=["7B", "1B", "tiny"], required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--format", choices=["bin", "safetensors"], default="bin",
                    help="bin: torch.save shards as published; safetensors: one model.safetensors")
    ap.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto",
                    help="where the random weights are drawn (cpu leaves the GPU to other work)")
    args = ap.parse_args()
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(TINY / "tokenizer.json", out / "tokenizer.json")
    t0 = time.time()

    if args.size == "tiny":
        from safetensors.torch import load_file
        state = collections.OrderedDict(sorted(load_file(str(TINY / "model.safetensors")).items()))
        shutil.copyfile(TINY / "config.json", out / "config.json")
        shards = 2
        first_fraction = 0.5
    else:
        cfg = SIZES[args.size]
        (out / "config.json").write_text(json.dumps(published_config(cfg["hidden"], cfg["intermediate"],
                                                                     cfg["layers"], cfg["heads"]), indent=2) + "\n")
        device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
        gen = torch.Generator(device=device).manual_seed(args.seed)
        state = collections.OrderedDict(
            (n, random_tensor(n, shape, device, gen))
            for n, shape in shapes(cfg["hidden"], cfg["intermediate"], cfg["layers"], cfg["heads"]).items())
        shards = cfg["shards"]
        first_fraction = 9.99 / 14.84  # the published 7B split: 9.99 GB + 4.85 GB
        print(f"  {len(state)} random tensors on {device} in {time.time() - t0:.1f} s", flush=True)

    sizes = {n: t.numel() * t.element_size() for n, t in state.items()}
    if args.format == "safetensors":
        save_safetensors(state, out / "model.safetensors")
        print(f"wrote {args.size} ({sum(sizes.values()) / 1e9:.2f} GB of tensors) to {out} in {time.time() - t0:.1f} s")
        return
    parts = split(list(state), sizes, shards, first_fraction)
    if len(parts) == 1:
        save(state, out / "pytorch_model.bin")
    else:
        weight_map = {}
        for i, part in enumerate(parts, 1):
            name = f"pytorch_model-{i:05d}-of-{len(parts):05d}.bin"
            save(collections.OrderedDict((n, state[n]) for n in part), out / name)
            weight_map.update({n: name for n in part})
        index = {"metadata": {"total_size": sum(sizes.values())}, "weight_map": weight_map}
        (out / "pytorch_model.bin.index.json").write_text(json.dumps(index, indent=2) + "\n")
    print(f"wrote {args.size} ({sum(sizes.values()) / 1e9:.2f} GB of tensors) to {out} in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    sys.exit(main())
