#!/usr/bin/env python3
"""Writes a random-weight Lumina-mGPT-7B checkpoint in Alpha-VLLM's published layout, for benchmarks where the
real weights cannot be downloaded (bench/gpu/scenarios/single-image.sh, SINGLE_MODEL=lumina-768):

  python3 tools/convert/make_lumina_random.py --out DIR/Lumina-mGPT-7B-768             # the 7B shape
  python3 tools/convert/make_lumina_random.py --out DIR/Lumina-mGPT-tiny-768 --size tiny  # seconds, a check

Name the folder as Alpha-VLLM does (ending -512, -768 or -1024): argen takes the target size, and so the
size list, from it (docs/checkpoint-format.md, "Lumina-mGPT"). DIR gets:
  config.json             ChameleonForConditionalGeneration with the published shape (hidden 4096, FFN 11008,
                          32 layers, 32 heads, vocab 65,536, 4,096 positions, rope theta 1e4, pre-norm,
                          model_parallel_size 1) and a vocabulary_map in the reduced Chameleon layout of
                          tools/lumina_torch/chameleon_vocab.py (names and order as published, unused ids dropped;
                          the 8,192 image tokens at ids 4..8195 as published)
  model.safetensors       the LM under HF's names, random BF16; q/k norms in Lumina-mGPT's
                          [model_parallel_size, head_dim] = [1, 128] form
  tokenizer.json, tokenizer_config.json   a byte-level BPE with Chameleon's pre-tokenizer and every special
                          token the loop uses (tools/train_lumina/text_tokenizer.py), trained on a few captions
  tokenizer/vqgan.yaml, tokenizer/vqgan.ckpt   Meta's Chameleon VQGAN shape (8,192 codes of 256, ch 128,
                          ch_mult 1 1 2 2 4, 2 ResNets a level), PyTorch's default init, a Lightning-style dict
                          (tools/lumina_torch/vqgan.py)

LM weights: scaled by 1/sqrt(fan_in), norm gammas 1, biases N(0, 0.02) (make_emu3_gen_random.random_tensor).
Drawn on the GPU when there is one. Needs torch, tokenizers and PyYAML (the device's python3 has them).
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_emu3_gen_random import lm_shapes, random_tensor  # noqa: E402
from make_janus_pro_bin import save_safetensors  # noqa: E402
from tools.lumina_torch.chameleon_vocab import PATCH_PIXELS, VocabLayout  # noqa: E402
from tools.lumina_torch.vqgan import VQModel, save_lightning_ckpt, write_yaml  # noqa: E402
from tools.train_lumina import text_tokenizer  # noqa: E402

VOCAB = 65536
CODES = 8192
SIZES = {
    "7B": dict(hidden=4096, intermediate=11008, layers=32, heads=32, vq_ch=128, vq_mult=[1, 1, 2, 2, 4], vq_z=256,
               vq_embed=256),
    "tiny": dict(hidden=64, intermediate=128, layers=2, heads=4, vq_ch=32, vq_mult=[1, 1, 1, 1, 2], vq_z=32,
                 vq_embed=8),
}
# Resolution tokens up to this many 32-pixel units: every size of the -1024 list (its longest side 2,048 px).
MAX_UNITS = 64
CAPTIONS = [
    "a red circle above a blue square", "two green stars on a white background", "a photo of a house with trees",
    "a cat sitting on a wooden chair", "an orange cross next to a purple diamond", "a city street at night",
    "three yellow triangles in a row", "a bowl of fruit on a kitchen table", "a mountain lake at sunrise",
    "a small dog running across a field of grass",
]


def target_of(out: Path) -> int:
    for target in (512, 768, 1024):
        if out.name.endswith(f"-{target}"):
            return target
    raise SystemExit(f"{out}: name the folder as Alpha-VLLM does, ending -512, -768 or -1024 (the target size)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--size", choices=sorted(SIZES), default="7B")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    args = ap.parse_args()
    c = SIZES[args.size]
    out: Path = args.out
    target = target_of(out)
    (out / "tokenizer").mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    torch.manual_seed(args.seed)

    tok = text_tokenizer.train_tokenizer(CAPTIONS, CODES, MAX_UNITS, target)
    text_tokenizer.save(tok, str(out))
    names = [tok.id_to_token(i) for i in range(tok.get_vocab_size())]
    layout = VocabLayout(CODES, MAX_UNITS, text_names=names[len(VocabLayout(CODES, MAX_UNITS).special_tokens()):])
    assert layout.vocab_size <= VOCAB
    config = {
        "architectures": ["ChameleonForConditionalGeneration"], "model_type": "chameleon", "attention_bias": False,
        "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2, "dropout": 0.0, "hidden_act": "silu",
        "hidden_size": c["hidden"], "initializer_range": 0.02, "intermediate_size": c["intermediate"],
        "mask_image_logits": False, "max_position_embeddings": 4096, "mlp_bias": False, "model_parallel_size": 1,
        "num_attention_heads": c["heads"], "num_hidden_layers": c["layers"], "num_key_value_heads": c["heads"],
        "rms_norm_eps": 1e-5, "rope_scaling": None, "rope_theta": 10000.0, "swin_norm": False,
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": VOCAB,
        "vocabulary_map": layout.vocabulary_map(),
        "vq_config": {"embed_dim": c["vq_embed"], "num_embeddings": CODES, "double_latent": False,
                      "latent_channels": c["vq_z"], "resolution": 512, "in_channels": 3, "base_channels": c["vq_ch"],
                      "channel_multiplier": c["vq_mult"], "num_res_blocks": 2, "attn_resolutions": [],
                      "dropout": 0.0, "attn_type": "vanilla", "model_type": "chameleon_vqgan"},
    }
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (out / "generation_config.json").write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 2}, indent=2) + "\n")

    vq_params = {"embed_dim": c["vq_embed"], "n_embed": CODES,
                 "ddconfig": {"double_z": False, "z_channels": c["vq_z"], "resolution": 512, "in_channels": 3,
                              "out_ch": 3, "ch": c["vq_ch"], "ch_mult": c["vq_mult"], "num_res_blocks": 2,
                              "attn_resolutions": [], "dropout": 0.0}}
    vq = VQModel(**vq_params)
    assert vq.downsample * 2 == PATCH_PIXELS, "a resolution unit is 2 x 2 codes"
    write_yaml(str(out / "tokenizer" / "vqgan.yaml"), vq_params)
    save_lightning_ckpt(str(out / "tokenizer" / "vqgan.ckpt"), vq)

    device = args.device if args.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    gen = torch.Generator(device=device).manual_seed(args.seed)
    # MHA; q/k norms in Lumina-mGPT's [model_parallel_size, head_dim] form.
    shapes = lm_shapes(dict(c, kv_heads=c["heads"]), VOCAB, qk_norm=(1, c["hidden"] // c["heads"]))
    lm = collections.OrderedDict((n, random_tensor(n, s, torch.bfloat16, device, gen)) for n, s in shapes.items())
    print(f"  {len(lm)} random tensors on {device} in {time.time() - t0:.1f} s", flush=True)
    save_safetensors(lm, out / "model.safetensors")
    total = sum(t.numel() * t.element_size() for t in lm.values())
    print(f"wrote Lumina-mGPT {args.size} (target {target} px, {total / 1e9:.2f} GB of LM tensors, "
          f"{layout.vocab_size} named tokens) to {out} in {time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
