#!/usr/bin/env python3
"""Tiny random Chameleon checkpoints in the published (HF) layout and HF transformers'
ChameleonForConditionalGeneration logits for them, for the Lumina-mGPT family tests.

Writes tests/goldens/chameleon/<variant>/:
  config.json        ChameleonForConditionalGeneration fields as Lumina-mGPT's config.json
                     spells them (rope_theta / rope_scaling, model_parallel_size,
                     swin_norm, mask_image_logits, vq_config, the vocabulary_map)
  model.safetensors  float32, HF tensor names (model.layers.{i}.self_attn.{q,k}_norm.{weight,bias},
                     lm_head.weight, model.vqmodel.* of a tiny encoder, ...)
  logits.f32         float32 little-endian logits, see goldens.json
  goldens.json       per token sequence: ids, prefill length, the rows of logits.f32 holding
                     the prefill logits of every prompt position and then one row per decode
                     step (cache path), and the vocabulary layout
Variants:
  tiny-chameleon         MHA, pre-norm, q/k norm weights distinct per head ([heads, head_dim], HF layout)
  tiny-chameleon-swin    swin_norm (post-norm placement), GQA (4 heads, 2 kv heads), HF layout
  tiny-chameleon-lumina  Lumina-mGPT's q/k-norm layout: weights [model_parallel_size, head_dim] with
                         model_parallel_size 2, expanded per head by repeat_interleave at run time.
                         HF transformers cannot load this file (it wants [heads, head_dim]); its logits
                         are HF's on the expanded weights, i.e. what Lumina-mGPT's own modeling computes.
The logits are lm_head(final hidden state) over the whole vocabulary: HF's
forward overwrites the image-token columns with the float minimum (its
ChameleonForConditionalGeneration only generates text); the script checks that
every other column equals HF's own output. Sequences follow the Lumina-mGPT
layout (see docs/lumina-mgpt.md): the conditional row <s> text <reserved08706>
<racm3:break> H W codes... <reserved08799> ..., and the unconditional row that
starts at <racm3:break>.

Run: .venv/bin/python tools/goldens/make_chameleon_goldens.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from transformers import ChameleonConfig, ChameleonForConditionalGeneration
from transformers.cache_utils import DynamicCache

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tools.lumina_torch.chameleon_vocab import VocabLayout  # noqa: E402

OUT = ROOT / "tests" / "goldens" / "chameleon"
LAYOUT = VocabLayout(num_image_tokens=64, max_resolution_units=16, text_tokens=160)

VARIANTS = {
    "tiny-chameleon": dict(heads=4, kv_heads=4, swin_norm=False, model_parallel_size=1, lumina_norms=False, seed=21),
    "tiny-chameleon-swin": dict(heads=4, kv_heads=2, swin_norm=True, model_parallel_size=1, lumina_norms=False,
                                seed=22),
    "tiny-chameleon-lumina": dict(heads=4, kv_heads=4, swin_norm=False, model_parallel_size=2, lumina_norms=True,
                                  seed=23),
}
HIDDEN, INTERMEDIATE, LAYERS = 32, 80, 2
TINY_VQ = {"embed_dim": 8, "num_embeddings": LAYOUT.num_image_tokens, "double_latent": False, "latent_channels": 8,
           "resolution": 32, "in_channels": 3, "base_channels": 32, "channel_multiplier": [1], "num_res_blocks": 1,
           "attn_resolutions": [], "dropout": 0.0, "attn_type": "vanilla"}


def published_config(v: dict) -> dict:
    """config.json in the published Lumina-mGPT style (transformers 4.43 field names)."""
    return {
        "architectures": ["ChameleonForConditionalGeneration"], "model_type": "chameleon",
        "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2,
        "dropout": 0.05, "hidden_act": "silu", "hidden_size": HIDDEN, "initializer_range": 0.02,
        "intermediate_size": INTERMEDIATE, "mask_image_logits": False, "max_position_embeddings": 256,
        "mlp_bias": False, "model_parallel_size": v["model_parallel_size"], "num_attention_heads": v["heads"],
        "num_hidden_layers": LAYERS, "num_key_value_heads": v["kv_heads"], "rms_norm_eps": 1e-05,
        "rope_scaling": None, "rope_theta": 10000.0, "swin_norm": v["swin_norm"], "tie_word_embeddings": False,
        "torch_dtype": "float32", "use_cache": True, "vocab_size": LAYOUT.vocab_size,
        "vocabulary_map": LAYOUT.vocabulary_map(), "vq_config": dict(TINY_VQ, model_type="chameleon_vqgan"),
    }


def sequences() -> dict:
    """Token sequences in the Lumina-mGPT layout: (ids, prefill length)."""
    t = LAYOUT.ids
    text = [LAYOUT.text_id(i) for i in (5, 17, 3, 40, 99, 12)]
    header = [t["<racm3:break>"], LAYOUT.resolution_id(2), LAYOUT.resolution_id(3)]  # 2 x 3 units: 4 x 6 codes
    codes = [LAYOUT.image_id(c) for c in (0, 63, 7, 31, 12, 5)]
    cond = [t["<s>"]] + text + [t["<reserved08706>"]] + header + codes + [t["<reserved08799>"]] + codes[:3]
    uncond = header + codes + [t["<reserved08799>"]] + codes[:3]
    return {"cond": (cond, 11), "uncond": (uncond, 3), "short": ([t["<s>"], LAYOUT.text_id(1)], 1)}


@torch.no_grad()
def randomize(model: ChameleonForConditionalGeneration, v: dict, gen: torch.Generator) -> None:
    for name, p in model.named_parameters():
        if name.endswith("layernorm.weight") or name == "model.norm.weight":
            p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=gen))
        elif "_norm." in name:  # q_norm / k_norm weight and bias [heads, head_dim]
            base = 1.0 if name.endswith("weight") else 0.0
            if v["lumina_norms"]:  # one row per model-parallel group, repeated over its heads
                groups = v["model_parallel_size"]
                rows = base + 0.3 * torch.randn((groups, p.shape[1]), generator=gen)
                p.copy_(rows.repeat_interleave(p.shape[0] // groups, dim=0))
            else:
                p.copy_(base + 0.3 * torch.randn(p.shape, generator=gen))
        elif not name.startswith("model.vqmodel."):
            p.copy_(0.08 * torch.randn(p.shape, generator=gen))


def lumina_layout(state: dict, v: dict) -> dict:
    """HF [heads, head_dim] q/k norms -> Lumina-mGPT's [model_parallel_size, head_dim] (first head of each group)."""
    out = dict(state)
    for k in state:
        if "_norm." in k:
            heads = state[k].shape[0]
            per = heads // v["model_parallel_size"]
            rows = state[k][::per].contiguous()
            assert torch.equal(rows.repeat_interleave(per, dim=0), state[k]), k
            out[k] = rows
    return out


@torch.no_grad()
def hidden_logits(model, ids: torch.Tensor, cache=None) -> torch.Tensor:
    """lm_head of the final (normed) hidden state over the whole vocabulary."""
    out = model.model(input_ids=ids, past_key_values=cache, use_cache=cache is not None)
    return out.last_hidden_state @ model.lm_head.weight.t()


@torch.no_grad()
def main() -> None:
    torch.set_num_threads(1)
    OUT.mkdir(parents=True, exist_ok=True)
    image_cols = torch.tensor(LAYOUT.image_ids())
    other_cols = torch.tensor([i for i in range(LAYOUT.vocab_size) if i not in set(LAYOUT.image_ids())])
    for variant, v in VARIANTS.items():
        out_dir = OUT / variant
        out_dir.mkdir(parents=True, exist_ok=True)
        cfg_dict = published_config(v)
        hf_dict = dict(cfg_dict, model_parallel_size=1)  # HF's modeling ignores it; Lumina's uses it
        config = ChameleonConfig(**{k: x for k, x in hf_dict.items() if k not in ("architectures", "torch_dtype")})
        torch.manual_seed(v["seed"])
        model = ChameleonForConditionalGeneration(config).eval()
        randomize(model, v, torch.Generator().manual_seed(v["seed"]))
        state = {k: t.detach().contiguous() for k, t in model.state_dict().items()}
        if v["lumina_norms"]:
            state = lumina_layout(state, v)
        save_file(state, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
        (out_dir / "config.json").write_text(json.dumps(cfg_dict, indent=2) + "\n")

        if not v["lumina_norms"]:  # the published layout must load in HF as is, with the same outputs
            reloaded = ChameleonForConditionalGeneration.from_pretrained(str(out_dir), dtype=torch.float32).eval()
            for k, t in reloaded.state_dict().items():
                assert torch.equal(t, model.state_dict()[k]), k
        else:
            stored = load_file(str(out_dir / "model.safetensors"))
            assert stored["model.layers.0.self_attn.q_norm.weight"].shape == (v["model_parallel_size"], HIDDEN // v["heads"])

        rows, entries = [], {}
        for name, (ids, prefill) in sequences().items():
            x = torch.tensor([ids])
            full = hidden_logits(model, x)
            masked = model(input_ids=x, use_cache=False).logits
            # HF's own logits: identical outside the image-token columns, float minimum inside.
            assert torch.allclose(full[0][:, other_cols], masked[0][:, other_cols], rtol=0, atol=1e-6)
            assert bool((masked[0][:, image_cols] == torch.finfo(torch.float32).min).all())
            cache = DynamicCache(config=config)
            pre = hidden_logits(model, x[:, :prefill], cache)
            steps = []
            for t in range(prefill, len(ids)):
                step = hidden_logits(model, x[:, t:t + 1], cache)
                steps.append(step[0, 0])
            decoded = torch.stack([*pre[0], *steps])
            # The cache path agrees with one full pass.
            assert torch.allclose(decoded, full[0], rtol=1e-5, atol=1e-5), (variant, name)
            entries[name] = {"ids": ids, "prefill": prefill, "first_row": sum(r.shape[0] for r in rows),
                             "rows": len(ids)}
            rows.append(decoded.float())
        logits = torch.cat(rows)
        (out_dir / "logits.f32").write_bytes(logits.numpy().astype("<f4").tobytes())
        meta = {
            "generator": "tools/goldens/make_chameleon_goldens.py",
            "reference": "transformers ChameleonForConditionalGeneration, float32, lm_head(last hidden state)",
            "vocab_size": LAYOUT.vocab_size, "image_token_ids": [LAYOUT.image_ids()[0], LAYOUT.image_ids()[-1] + 1],
            "logits_file": "logits.f32", "logits_sum": float(logits.double().sum()),
            "note": "rows [first_row, first_row + prefill) are the prefill logits at every prompt position; "
                    "row first_row + prefill + s is decode step s (input ids[prefill + s], KV cache)",
            "sequences": entries,
        }
        (out_dir / "goldens.json").write_text(json.dumps(meta, indent=1) + "\n")
        size = sum(f.stat().st_size for f in out_dir.iterdir())
        print(f"{variant}: {len(entries)} sequences, {logits.shape[0]} logit rows, {size / 1e3:.0f} kB")


if __name__ == "__main__":
    main()
