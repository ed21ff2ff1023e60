#!/usr/bin/env python3
"""Writes the tiny random Janus-Pro-layout checkpoints under tests/goldens/tiny/.

Run with the development Python:  .venv/bin/python tools/goldens/make_tiny_checkpoint.py

Every checkpoint directory has the official layout (docs/checkpoint-format.md):
config.json (model_type "multi_modality"), safetensors weights with the official
tensor names, and a tokenizer.json. Sizes:
  LLM   hidden 64, 2 layers, 4 heads (head_dim 16), intermediate 160, vocab 512,
        rms_norm_eps 1e-6, rope_theta 10000  (HF LlamaForCausalLM, random init)
  image vocab 64 codes, gen_embed width 8, gen_aligner 8 -> 64 -> 64 (mlp_gelu),
        gen_head 64 -> 64 -> 64
  VQ    ch 32, ch_mult [1, 1, 2] (4x), z_channels 32, num_res_blocks 1, codebook
        64 x 8 l2-normalised; image 32 px -> 8 x 8 token grid (64 image tokens);
        decoder side only (plus quant_conv): the encoder is training-only
  understanding stand-ins: small vision_model.* / aligner.* tensors, never read
Variants:
  tiny-mha/          4 kv heads (MHA), one model.safetensors
  tiny-gqa-sharded/  2 kv heads (GQA), 3 shards + model.safetensors.index.json
Dtypes are mixed on purpose (F32, BF16, F16) to exercise conversion; see DTYPES.
Both variants share tokenizer.json: a byte-level BPE trained here with HF
tokenizers on synthetic captions, with DeepSeek-LLM's pre-tokenizer and the
Janus special tokens as added tokens after the learned vocabulary.

Also writes, for engine/checkpoint/tests:
  checkpoint_golden.json   per variant and tensor: dtype, shape, float64 sum and
                           abs-sum of the f32 values, first values, some rows
  dtype_probe.safetensors  every F16 bit pattern and a BF16 sample, each with the
                           f32 values PyTorch converts them to

Deterministic: fixed seeds; running it twice gives identical files.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path
from typing import Dict, List

import torch
from safetensors.torch import save_file
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import LlamaConfig, LlamaForCausalLM

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
from janus_torch.vq16 import VQModel  # noqa: E402  (helper "vq"'s PyTorch VQ-16)

# --- sizes ------------------------------------------------------------------
HIDDEN = 64
LAYERS = 2
HEADS = 4
INTERMEDIATE = 160
VOCAB = 512              # >= tokenizer size, padded like Janus-Pro's 102400
IMAGE_VOCAB = 64
GEN_EMBED = 8
VQ = dict(codebook_size=IMAGE_VOCAB, codebook_embed_dim=8, codebook_l2_norm=True,
          ch=32, ch_mult=[1, 1, 2], z_channels=32, num_res_blocks=1)
IMAGE_SIZE = 32

# --- tokenizer ----------------------------------------------------------------
BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
PAD = "<｜▁pad▁｜>"
# Janus-Pro's added tokens used by generation (janus/models/processing_vlm.py,
# janus/utils/conversation.py); <image_placeholder> is understanding-only but
# part of the official vocabulary.
SPECIAL_TOKENS = [BOS, EOS, PAD, "<image_placeholder>", "<begin_of_image>", "<end_of_image>",
                  "<|User|>", "<|Assistant|>"]
BPE_VOCAB = VOCAB - 32 - len(SPECIAL_TOKENS)
# DeepSeek-LLM's pre-tokenizer (deepseek-ai/deepseek-llm tokenizer.json, as
# Janus ships it): six isolating regex splits, then byte-level mapping. The
# letter class is spelled as code points: several of its characters (e.g.
# U+1FD3, U+212A) change under Unicode normalisation, which would corrupt it.
CASED_LETTER_RANGES = [
    (0x41, 0x5A), (0x61, 0x7A), (0xB5, 0xB5), (0xC0, 0xD6), (0xD8, 0xF6), (0xF8, 0x1BA), (0x1BC, 0x1BF),
    (0x1C4, 0x293), (0x295, 0x2AF), (0x370, 0x373), (0x376, 0x377), (0x37B, 0x37D), (0x37F, 0x37F),
    (0x386, 0x386), (0x388, 0x38A), (0x38C, 0x38C), (0x38E, 0x3A1), (0x3A3, 0x3F5), (0x3F7, 0x481),
    (0x48A, 0x52F), (0x531, 0x556), (0x10A0, 0x10C5), (0x13A0, 0x13F5), (0x13F8, 0x13FD), (0x1C90, 0x1CBA),
    (0x1CBD, 0x1CBF), (0x1D00, 0x1D2B), (0x1D6B, 0x1D77), (0x1D79, 0x1D9A), (0x1E00, 0x1F15), (0x1F18, 0x1F1D),
    (0x1F20, 0x1F45), (0x1F48, 0x1F4D), (0x1F50, 0x1F57), (0x1F59, 0x1F59), (0x1F5B, 0x1F5B), (0x1F5D, 0x1F5D),
    (0x1F5F, 0x1F7D), (0x1F80, 0x1FB4), (0x1FB6, 0x1FBC), (0x1FBE, 0x1FBE), (0x1FC2, 0x1FC4), (0x1FC6, 0x1FCC),
    (0x1FD0, 0x1FD3), (0x1FD6, 0x1FDB), (0x1FE0, 0x1FEC), (0x1FF2, 0x1FF4), (0x1FF6, 0x1FFC), (0x2102, 0x2102),
    (0x2107, 0x2107), (0x210A, 0x2113), (0x2115, 0x2115), (0x2119, 0x211D), (0x2124, 0x2124), (0x2126, 0x2126),
    (0x2128, 0x2128), (0x212A, 0x212D), (0x212F, 0x2134), (0x2139, 0x2139), (0x213C, 0x213F), (0x2145, 0x2149),
    (0x214E, 0x214E), (0x2183, 0x2184), (0x2C00, 0x2C7B), (0x2C7E, 0x2CE4), (0x2CEB, 0x2CEE), (0x2CF2, 0x2CF3),
    (0xA640, 0xA66D), (0xA680, 0xA69B), (0xA722, 0xA76F), (0xA771, 0xA787), (0xA78B, 0xA78E), (0xAB70, 0xABBF),
    (0xFB00, 0xFB06), (0xFB13, 0xFB17), (0xFF21, 0xFF3A), (0xFF41, 0xFF5A), (0x10400, 0x1044F), (0x104B0, 0x104D3),
    (0x104D8, 0x104FB), (0x10C80, 0x10CB2), (0x10CC0, 0x10CF2), (0x118A0, 0x118DF), (0x1E900, 0x1E943),
]
CASED_LETTERS = "".join(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in CASED_LETTER_RANGES)
DEEPSEEK_SPLITS = [
    "[\r\n]",
    "\\s?[" + CASED_LETTERS + "]+",
    "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+",
    "\\s+$",
    "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+",
    "\\p{N}+",
]

COLORS = ["red", "green", "blue", "yellow", "purple", "orange", "white", "black", "golden", "teal"]
THINGS = ["cat", "dog", "house", "tree", "car", "boat", "mountain", "flower", "bird", "robot", "castle", "apple"]
PLACES = ["on a hill", "by the sea", "in a forest", "under the stars", "in the city", "on a table",
          "near a river", "in the snow", "at sunset", "in a garden"]
STYLES = ["photo", "painting", "sketch", "3D render", "watercolor", "pixel art"]
EXTRAS = ["Café au lait, très bien!", "东京的夜景 with 3 lights", "Größe: 42 cm", "naïve résumé — 100%",
          "a 1024x768 image", "(close-up) #2", "it's 12:30 pm", "emoji 🐱 and 🌟", "Ünïcödé ÀÉÎÕÜ",
          "tabs\tand  spaces", "line one\nline two"]


def synthetic_captions(n: int, seed: int) -> List[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        cap = f"a {rng.choice(STYLES)} of a {rng.choice(COLORS)} {rng.choice(THINGS)} {rng.choice(PLACES)}"
        if i % 3 == 0:
            cap += f", {rng.randint(1, 9999)} pixels wide."
        if i % 5 == 0:
            cap = cap.capitalize() + " " + rng.choice(EXTRAS)
        out.append(cap)
    return out


def make_tokenizer(seed: int) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.normalizer = None
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(r), behavior="isolated", invert=False) for r in DEEPSEEK_SPLITS]
        + [pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=BPE_VOCAB, min_frequency=2, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=[])
    tok.train_from_iterator(synthetic_captions(600, seed), trainer=trainer)
    # Added after the learned vocabulary, as in Janus (ids 100000+ there).
    tok.add_special_tokens(SPECIAL_TOKENS)
    # LlamaTokenizerFast with add_bos_token: encode() prepends BOS, as the official processor relies on.
    tok.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, tok.token_to_id(BOS))])
    return tok


# --- weights ------------------------------------------------------------------
def randomise_(module: torch.nn.Module, gen: torch.Generator, std: float) -> None:
    """Random values everywhere: norms around 1 and non-zero biases, so a missed term shows in goldens."""
    with torch.no_grad():
        for name, p in module.named_parameters():
            is_norm = "norm" in name.split(".")[-2]  # input_layernorm, norm, norm1, norm_out, ...
            if is_norm and name.endswith(".weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif name.endswith(".bias"):
                p.copy_(0.05 * torch.randn(p.shape, generator=gen))
            else:
                fan_in = p[0].numel() if p.dim() > 1 else p.numel()
                p.copy_(torch.randn(p.shape, generator=gen) * min(std, 1.0 / fan_in ** 0.5 * 1.5))


def llm_tensors(kv_heads: int, gen: torch.Generator) -> Dict[str, torch.Tensor]:
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTERMEDIATE,
                      num_hidden_layers=LAYERS, num_attention_heads=HEADS, num_key_value_heads=kv_heads,
                      rms_norm_eps=1e-6, rope_theta=10000.0, max_position_embeddings=512,
                      tie_word_embeddings=False, attention_bias=False, mlp_bias=False)
    model = LlamaForCausalLM(cfg)
    randomise_(model, gen, std=0.15)
    return {"language_model." + k: v.detach().clone() for k, v in model.state_dict().items()
            if "rotary_emb" not in k}


def linear(out_dim: int, in_dim: int, gen: torch.Generator) -> List[torch.Tensor]:
    scale = 1.0 / in_dim ** 0.5
    return [torch.randn(out_dim, in_dim, generator=gen) * scale, 0.05 * torch.randn(out_dim, generator=gen)]


def gen_tensors(gen: torch.Generator) -> Dict[str, torch.Tensor]:
    t: Dict[str, torch.Tensor] = {"gen_embed.weight": torch.randn(IMAGE_VOCAB, GEN_EMBED, generator=gen)}
    t["gen_aligner.layers.0.weight"], t["gen_aligner.layers.0.bias"] = linear(HIDDEN, GEN_EMBED, gen)
    t["gen_aligner.layers.2.weight"], t["gen_aligner.layers.2.bias"] = linear(HIDDEN, HIDDEN, gen)
    t["gen_head.output_mlp_projector.weight"], t["gen_head.output_mlp_projector.bias"] = linear(HIDDEN, HIDDEN, gen)
    t["gen_head.vision_head.weight"], t["gen_head.vision_head.bias"] = linear(IMAGE_VOCAB, HIDDEN, gen)
    return t


def understanding_tensors(gen: torch.Generator) -> Dict[str, torch.Tensor]:
    """Small stand-ins for vision_model / aligner: present as in the official file, never read by generation."""
    t = {"vision_model.vision_tower.patch_embed.proj.weight": torch.randn(16, 3, 4, 4, generator=gen),
         "vision_model.vision_tower.patch_embed.proj.bias": torch.randn(16, generator=gen)}
    t["aligner.layers.0.weight"], t["aligner.layers.0.bias"] = linear(HIDDEN, 16, gen)
    t["aligner.layers.2.weight"], t["aligner.layers.2.bias"] = linear(HIDDEN, HIDDEN, gen)
    return t


def vq_tensors(gen: torch.Generator) -> Dict[str, torch.Tensor]:
    torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
    model = VQModel(**VQ)
    randomise_(model, gen, std=0.2)
    with torch.no_grad():  # a codebook with distinct rows of varied norm (l2-normalised at lookup)
        model.quantize.embedding.weight.copy_(torch.randn(IMAGE_VOCAB, VQ["codebook_embed_dim"], generator=gen))
        model.decoder.conv_out.weight.mul_(0.3)  # pixels mostly inside [-1, 1]: few saturate at 0 / 255
    # The encoder (image -> tokens) and the usage counter are training-only; the
    # official file has them, but they would triple the size of these files.
    return {"gen_vision_model." + k: v.detach().clone() for k, v in model.state_dict().items()
            if not k.startswith("encoder.") and k != "quantize.codebook_used"}


def storage_dtype(name: str) -> torch.dtype:
    """Mixed on purpose; every dtype appears in the LLM, gen_* and VQ parts."""
    if name.startswith("language_model.model.layers.0."):
        return torch.bfloat16
    if name.startswith("language_model.model.layers.1."):
        return torch.float16
    if name.startswith("language_model.lm_head") or name.startswith("gen_aligner.") or name.startswith("vision_model."):
        return torch.bfloat16
    if name.startswith("gen_head.") and name.endswith(".weight"):
        return torch.float16
    if name.startswith("gen_vision_model.decoder.mid."):
        return torch.bfloat16
    if name.startswith("gen_vision_model.decoder.conv_blocks."):
        return torch.float16
    return torch.float32


def build_state(kv_heads: int, seed: int) -> Dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    state: Dict[str, torch.Tensor] = {}
    state.update(llm_tensors(kv_heads, gen))
    state.update(gen_tensors(gen))
    state.update(understanding_tensors(gen))
    state.update(vq_tensors(gen))
    return {k: v.to(storage_dtype(k)).contiguous() for k, v in sorted(state.items())}


def config_json(kv_heads: int) -> dict:
    return {
        "model_type": "multi_modality",
        "torch_dtype": "bfloat16",
        "transformers_version": "4.33.1",
        "language_config": {
            "model_type": "llama",
            "hidden_size": HIDDEN,
            "intermediate_size": INTERMEDIATE,
            "num_hidden_layers": LAYERS,
            "num_attention_heads": HEADS,
            "num_key_value_heads": kv_heads,
            "rms_norm_eps": 1e-6,
            "rope_theta": 10000.0,
            "vocab_size": VOCAB,
            "max_position_embeddings": 512,
            "torch_dtype": "bfloat16",
        },
        "vision_config": {"cls": "CLIPVisionTower", "model_type": "vision",
                          "params": {"image_size": 16, "model_name": "tiny_stand_in", "select_feature": "same",
                                     "select_layer": -1}},
        "aligner_config": {"cls": "MlpProjector", "model_type": "aligner",
                           "params": {"depth": 2, "input_dim": 16, "n_embed": HIDDEN, "projector_type": "mlp_gelu"}},
        "gen_vision_config": {"cls": "VQ-16", "model_type": "gen_vision",
                              "params": {"image_token_size": IMAGE_VOCAB, "n_embed": GEN_EMBED,
                                         # argen extension keys (docs/checkpoint-format.md)
                                         "codebook_size": VQ["codebook_size"],
                                         "codebook_embed_dim": VQ["codebook_embed_dim"],
                                         "codebook_l2_norm": VQ["codebook_l2_norm"],
                                         "ch": VQ["ch"], "ch_mult": VQ["ch_mult"], "z_channels": VQ["z_channels"],
                                         "num_res_blocks": VQ["num_res_blocks"], "image_size": IMAGE_SIZE}},
        "gen_aligner_config": {"cls": "MlpProjector", "model_type": "gen_aligner",
                               "params": {"depth": 2, "input_dim": GEN_EMBED, "n_embed": HIDDEN,
                                          "projector_type": "mlp_gelu"}},
        "gen_head_config": {"cls": "vision_head", "model_type": "gen_head",
                            "params": {"image_token_embed": HIDDEN, "image_token_size": IMAGE_VOCAB,
                                       "n_embed": HIDDEN}},
    }


def shard_of(name: str) -> int:
    if name.startswith("language_model.model.layers."):
        return 1
    if name.startswith("gen_vision_model."):
        return 3
    return 2


def write_checkpoint(out: Path, state: Dict[str, torch.Tensor], kv_heads: int, sharded: bool,
                     tokenizer: Tokenizer) -> None:
    out.mkdir(parents=True, exist_ok=True)
    for stale in list(out.glob("*.safetensors")) + list(out.glob("*.index.json")):
        stale.unlink()
    (out / "config.json").write_text(json.dumps(config_json(kv_heads), indent=2, ensure_ascii=False) + "\n")
    tokenizer.save(str(out / "tokenizer.json"), pretty=True)
    metadata = {"format": "pt"}
    if not sharded:
        save_file(state, str(out / "model.safetensors"), metadata=metadata)
        return
    n = 3
    names = {i: f"model-{i:05d}-of-{n:05d}.safetensors" for i in range(1, n + 1)}
    weight_map = {}
    for i in range(1, n + 1):
        part = {k: v for k, v in state.items() if shard_of(k) == i}
        save_file(part, str(out / names[i]), metadata=metadata)
        weight_map.update({k: names[i] for k in part})
    total = sum(v.numel() * v.element_size() for v in state.values())
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")


# --- goldens for the loader tests ---------------------------------------------
DTYPE_NAMES = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}
ROWS_OF = {"language_model.model.embed_tokens.weight": [0, 1, 17, VOCAB - 1],
           "gen_embed.weight": [0, 5, IMAGE_VOCAB - 1],
           "language_model.model.layers.0.self_attn.q_proj.weight": [3, 63],
           "language_model.model.layers.1.mlp.down_proj.weight": [0, 40]}


def tensor_golden(name: str, t: torch.Tensor) -> dict:
    f = t.float()  # PyTorch's own dtype conversion is the reference
    g = {"dtype": DTYPE_NAMES[t.dtype], "shape": list(t.shape),
         "sum": float(f.double().sum()), "abs_sum": float(f.double().abs().sum()),
         "first": [float(x) for x in f.reshape(-1)[:6]]}
    if name in ROWS_OF:
        g["rows"] = {str(r): [float(x) for x in f[r]] for r in ROWS_OF[name]}
    return g


def write_dtype_probe(path: Path) -> None:
    f16_bits = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16)  # every F16 pattern
    f16 = f16_bits.view(torch.float16)
    gen = torch.Generator().manual_seed(7)
    bf16_bits = torch.cat([torch.arange(-32768, -32768 + 256, dtype=torch.int32),       # negative zero & subnormals
                           torch.arange(0, 256, dtype=torch.int32),                     # positive subnormals
                           torch.arange(0x7f00, 0x7fff + 1, dtype=torch.int32),         # large, inf, NaN
                           torch.randint(-32768, 32768, (3328,), generator=gen, dtype=torch.int32)]).to(torch.int16)
    bf16 = bf16_bits.view(torch.bfloat16)
    save_file({"f16_all": f16.contiguous(), "f16_all_as_f32": f16.float().contiguous(),
               "bf16_sample": bf16.contiguous(), "bf16_sample_as_f32": bf16.float().contiguous()},
              str(path), metadata={"format": "pt"})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "goldens" / "tiny")
    args = ap.parse_args()
    torch.use_deterministic_algorithms(True)
    tokenizer = make_tokenizer(seed=1234)
    assert tokenizer.get_vocab_size() <= VOCAB, tokenizer.get_vocab_size()

    variants = [("tiny-mha", HEADS, False, 20250101), ("tiny-gqa-sharded", 2, True, 20250202)]
    golden = {"note": "made by tools/goldens/make_tiny_checkpoint.py; values are PyTorch's f32 view of the stored tensors",
              "variants": {}}
    for name, kv_heads, sharded, seed in variants:
        state = build_state(kv_heads, seed)
        write_checkpoint(args.out / name, state, kv_heads, sharded, tokenizer)
        golden["variants"][name] = {"sharded": sharded, "num_key_value_heads": kv_heads,
                                    "tensors": {k: tensor_golden(k, v) for k, v in state.items()}}
    (args.out / "checkpoint_golden.json").write_text(json.dumps(golden, indent=1) + "\n")
    write_dtype_probe(args.out / "dtype_probe.safetensors")
    for p in sorted(args.out.rglob("*")):
        if p.is_file():
            print(f"{p.stat().st_size:>9}  {p.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
