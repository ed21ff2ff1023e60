#!/usr/bin/env python3
"""Writes a random-weight Emu3-Gen checkpoint in BAAI's published layout, for benchmarks where the real
weights cannot be downloaded (bench/gpu/scenarios/emu3.sh):

  python3 tools/convert/make_emu3_gen_random.py --out DIR                      # 720 x 720 default size
  python3 tools/convert/make_emu3_gen_random.py --out DIR --image-area 262144  # 512 x 512 default size
  python3 tools/convert/make_emu3_gen_random.py --out DIR --size tiny          # seconds, for a quick check

DIR gets what argen reads of BAAI/Emu3-Gen + BAAI/Emu3-VisionTokenizer (docs/checkpoint-format.md, "Emu3"):
  config.json             model_type Emu3 with the published shape (hidden 4096, FFN 14336, 32 layers,
                          32 heads / 8 KV heads, vocab 184,622, rope theta 1e6, 9,216 positions) and the
                          published special ids; image_area as given (default 720^2)
  model.safetensors       the decoder under BAAI's names (model.layers.*, lm_head.weight), random BF16
                          (published: fp32 shards; bf16 halves the write, and argen serves bf16 either way)
  emu3.tiktoken           151,643 synthetic ranks (the 256 bytes, then two- and three-character
                          printable merges), so the special and visual ids are the published ones:
                          row end 151,846, BOS 151,849, <|image token|> 151,851, visual code k 151,854 + k
  emu3_vision_tokens.txt  <|image token|>, <|image start|>, <|image end|>, 32,768 visual tokens
  vision_tokenizer/       config.json (Emu3VisionVQ: ch 256, ch_mult 1 2 2 4, 2 ResNets a level, attention
                          at level 3) and model.safetensors with the decoder's tensors (fp32, as published;
                          the encoder, never read when generating, is left out)

Weights: scaled by 1/sqrt(fan_in), norm gammas 1, biases N(0, 0.02); BatchNorm running stats 0 / 1.
Drawn on the GPU when there is one. Needs torch only (the device's python3 has it).
"""

from __future__ import annotations

import argparse
import base64
import collections
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_janus_pro_bin import save_safetensors  # noqa: E402  (the writer that needs no safetensors package)

RANKS = 151643  # Qwen's rank count, which BAAI's tokenizer hard-codes as the first special id
CODES = 32768
SIZES = {
    "8B": dict(hidden=4096, intermediate=14336, layers=32, heads=32, kv_heads=8, vq_ch=256, vq_mult=[1, 2, 2, 4],
               vq_blocks=2),
    "tiny": dict(hidden=64, intermediate=128, layers=2, heads=4, kv_heads=2, vq_ch=32, vq_mult=[1, 1, 1, 2],
                 vq_blocks=1),
}


def ranks() -> list[bytes]:
    alphabet = [bytes([c]) for c in range(0x20, 0x7F)]
    out = [bytes([b]) for b in range(256)]
    out += [a + b for a in alphabet for b in alphabet]  # each the merge of its two bytes
    for a in alphabet:  # "abc" merges from "ab" + "c" (or "a" + "bc"): both pairs rank lower
        for b in alphabet:
            for c in alphabet:
                if len(out) == RANKS:
                    return out
                out.append(a + b + c)
    raise AssertionError("alphabet too small")


def special_ids() -> dict[str, int]:
    names = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [f"<|extra_{i}|>" for i in range(205)]
    names += ["<|image token|>", "<|image start|>", "<|image end|>"]
    return {n: RANKS + i for i, n in enumerate(names)}


def lm_shapes(c: dict, vocab: int, qk_norm: tuple | None = None) -> "collections.OrderedDict[str, tuple]":
    """A Llama-style decoder under HF's names (c: hidden, intermediate, layers, heads, kv_heads); qk_norm, when
    given, is the shape of each layer's self_attn.{q,k}_norm.{weight,bias} (Chameleon / Lumina-mGPT)."""
    h, f, kv = c["hidden"], c["intermediate"], c["kv_heads"] * (c["hidden"] // c["heads"])
    s = collections.OrderedDict()
    s["model.embed_tokens.weight"] = (vocab, h)
    for i in range(c["layers"]):
        p = f"model.layers.{i}."
        s[p + "input_layernorm.weight"] = (h,)
        s[p + "self_attn.q_proj.weight"] = (h, h)
        s[p + "self_attn.k_proj.weight"] = (kv, h)
        s[p + "self_attn.v_proj.weight"] = (kv, h)
        s[p + "self_attn.o_proj.weight"] = (h, h)
        if qk_norm is not None:
            for norm in ("q_norm", "k_norm"):
                s[p + f"self_attn.{norm}.weight"] = qk_norm
                s[p + f"self_attn.{norm}.bias"] = qk_norm
        s[p + "post_attention_layernorm.weight"] = (h,)
        s[p + "mlp.gate_proj.weight"] = (f, h)
        s[p + "mlp.up_proj.weight"] = (f, h)
        s[p + "mlp.down_proj.weight"] = (h, f)
    s["model.norm.weight"] = (h,)
    s["lm_head.weight"] = (vocab, h)
    return s


def vq_shapes(ch: int, mult: list[int], blocks: int, z: int = 4, temporal_ups: int = 2,
              attn_levels=(3,)) -> "collections.OrderedDict[str, tuple]":
    """The decode path's tensors of BAAI's Emu3VisionVQModel (engine/emu3vq/emu3vq_weights.cc walks the same)."""
    s = collections.OrderedDict()
    s["quantize.embedding.weight"] = (CODES, z)
    s["post_quant_conv.conv.weight"] = (z, z, 3, 1, 1)
    s["post_quant_conv.conv.bias"] = (z,)

    def conv(name, cin, cout, k):
        s[name + ".weight"] = (cout, cin, k, k)
        s[name + ".bias"] = (cout,)

    def spatial_norm(name, c):
        s[name + ".norm_layer.weight"] = (c,)
        s[name + ".norm_layer.bias"] = (c,)
        conv(name + ".conv_y", z, c, 1)
        conv(name + ".conv_b", z, c, 1)

    def resnet(name, cin, cout):
        spatial_norm(name + ".norm1", cin)
        conv(name + ".conv1", cin, cout, 3)
        spatial_norm(name + ".norm2", cout)
        conv(name + ".conv2", cout, cout, 3)
        if cin != cout:
            conv(name + ".nin_shortcut", cin, cout, 1)

    def attn(name, c):
        spatial_norm(name + ".norm", c)
        for p in ("q", "k", "v", "proj_out"):
            conv(f"{name}.{p}", c, c, 1)

    for i in range(blocks):
        p = f"decoder.time_res_stack.{i}"
        for n in ("norm1", "norm2"):
            for t in ("weight", "bias", "running_mean", "running_var"):
                s[f"{p}.{n}.{t}"] = (z,)
            if n == "norm1":
                s[f"{p}.conv1.conv.weight"] = (z, z, 3, 3, 3)
                s[f"{p}.conv1.conv.bias"] = (z,)
        s[f"{p}.conv2.conv.weight"] = (z, z, 3, 3, 3)
        s[f"{p}.conv2.conv.bias"] = (z,)
    for i in range(temporal_ups):
        s[f"decoder.time_conv.{i}.conv.conv.weight"] = (z, z, 3, 3, 3)
        s[f"decoder.time_conv.{i}.conv.conv.bias"] = (z,)
    block_in = ch * mult[-1]
    conv("decoder.conv_in", z, block_in, 3)
    resnet("decoder.mid.block_1", block_in, block_in)
    attn("decoder.mid.attn_1", block_in)
    resnet("decoder.mid.block_2", block_in, block_in)
    for level in reversed(range(len(mult))):
        block_out = ch * mult[level]
        for i in range(blocks + 1):
            resnet(f"decoder.up.{level}.block.{i}", block_in, block_out)
            block_in = block_out
            if level in attn_levels:
                attn(f"decoder.up.{level}.attn.{i}", block_in)
        if level != 0:
            conv(f"decoder.up.{level}.upsample.conv", block_in, block_in, 3)
    spatial_norm("decoder.norm_out", block_in)
    conv("decoder.conv_out", block_in, 3, 3)
    return s


def random_tensor(name: str, shape: tuple, dtype, device: str, gen: torch.Generator) -> torch.Tensor:
    last = name.rsplit(".", 2)
    if name.endswith("running_mean"):
        return torch.zeros(shape, dtype=dtype)
    if name.endswith("running_var") or (len(last) >= 2 and "norm" in last[-2] and last[-1] == "weight"):
        return torch.ones(shape, dtype=dtype)
    t = torch.empty(shape, dtype=dtype, device=device)
    if name.endswith(".bias"):
        t.normal_(0.0, 0.02, generator=gen)
    else:
        fan_in = 1
        for d in shape[1:]:
            fan_in *= d
        t.normal_(0.0, 1.0 / max(fan_in, 1) ** 0.5, generator=gen)
    return t.cpu()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--size", choices=sorted(SIZES), default="8B")
    ap.add_argument("--image-area", type=int, default=720 * 720,
                    help="config.json image_area: the default size's pixel area (720^2: 90 x 90 codes)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    args = ap.parse_args()
    c = SIZES[args.size]
    out: Path = args.out
    (out / "vision_tokenizer").mkdir(parents=True, exist_ok=True)
    t0 = time.time()

    ids = special_ids()
    vocab = RANKS + len(ids) + CODES  # 184,622
    (out / "emu3.tiktoken").write_text("".join(f"{base64.b64encode(t).decode()} {r}\n" for r, t in enumerate(ranks())))
    (out / "emu3_vision_tokens.txt").write_text(
        "\n".join(["<|image token|>", "<|image start|>", "<|image end|>"] +
                  [f"<|visual token {k:06d}|>" for k in range(CODES)]) + "\n")
    config = dict(architectures=["Emu3ForCausalLM"], model_type="Emu3", vocab_size=vocab, hidden_size=c["hidden"],
                  intermediate_size=c["intermediate"], num_hidden_layers=c["layers"],
                  num_attention_heads=c["heads"], num_key_value_heads=c["kv_heads"], hidden_act="silu",
                  max_position_embeddings=9216, rms_norm_eps=1e-5, rope_theta=1000000.0, rope_scaling=None,
                  tie_word_embeddings=False, pad_token_id=ids["<|endoftext|>"], bos_token_id=ids["<|extra_203|>"],
                  eos_token_id=ids["<|extra_204|>"], img_token_id=ids["<|image token|>"],
                  boi_token_id=ids["<|image start|>"], eoi_token_id=ids["<|image end|>"],
                  eol_token_id=ids["<|extra_200|>"], eof_token_id=ids["<|extra_201|>"],
                  image_area=args.image_area, torch_dtype="bfloat16")
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out / "vision_tokenizer/config.json").write_text(json.dumps(dict(
        architectures=["Emu3VisionVQModel"], model_type="Emu3VisionVQ", codebook_size=CODES, embed_dim=4,
        z_channels=4, double_z=False, in_channels=3, out_channels=3, temporal_downsample_factor=4, ch=c["vq_ch"],
        ch_mult=c["vq_mult"], num_res_blocks=c["vq_blocks"], attn_resolutions=[3], dropout=0.0), indent=2) + "\n")

    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    gen = torch.Generator(device=device).manual_seed(args.seed)
    vq = collections.OrderedDict((n, random_tensor(n, s, torch.float32, device, gen))
                                 for n, s in vq_shapes(c["vq_ch"], c["vq_mult"], c["vq_blocks"]).items())
    lm = collections.OrderedDict((n, random_tensor(n, s, torch.bfloat16, device, gen))
                                 for n, s in lm_shapes(c, vocab).items())
    print(f"  {len(lm) + len(vq)} random tensors on {device} in {time.time() - t0:.1f} s", flush=True)
    save_safetensors(vq, out / "vision_tokenizer/model.safetensors")
    save_safetensors(lm, out / "model.safetensors")
    total = sum(t.numel() * t.element_size() for t in list(lm.values()) + list(vq.values()))
    print(f"wrote Emu3-Gen {args.size} (image_area {args.image_area}, {total / 1e9:.2f} GB of tensors) to {out} "
          f"in {time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
