#!/usr/bin/env python3
"""Tiny random Anole (Chameleon-7B with image generation, GAIR-NLP/anole) checkpoints in both
published layouts, and transformers' outputs for them, for engine/families/anole's tests.

One model, written twice:
  tests/goldens/tiny/tiny-anole-hf/     the community -hf conversion (leloy/Anole-7b-v0.1-hf):
      config.json          ChameleonConfig (model_type "chameleon", vocabulary_map)
      model.safetensors    bfloat16, HF names (model.layers.{i}.self_attn.{q,k}_norm [heads, head_dim], ...)
      tokenizer.json       the Chameleon BPE test tokenizer (tests/goldens/tokenizer/chameleon, see
                           chameleon_tokenizer()), <image> as HF names it
      tokenizer_config.json
      goldens.json, logits.f32   transformers' logits and the prompt ids (below)
  tests/goldens/tiny/tiny-anole-meta/   Meta's layout as GAIR/Anole-7b-v0.1 ships it:
      models/7b/params.json       {"model_parallel_size": 1, "model": {dim, n_layers, n_heads, ...}}
      models/7b/consolidated.pth  torch.save dict, bfloat16, Meta's names (tok_embeddings, layers.{i}.attention.wq,
                                  q_normalization [head_dim], feed_forward.w1/w2/w3, output, ...)
      tokenizer/text_tokenizer.json   the same tokenizer with <reserved08707> where HF's converter wrote <image>
      tokenizer/vqgan.yaml, tokenizer/vqgan.ckpt   a tiny Chameleon VQGAN (64 codes, 2x: 32 x 32 codes -> 64 px),
                                  a Lightning-style dict in bfloat16 (the -hf folder's tests point vqgan_dir here)
The Meta files are the HF ones through the inverse of transformers' convert_chameleon_weights_to_hf.py
(its permute() for sliced rotary on wq / wk and the view(head_dim // 2, 2).t() of the q/k norms); the script
re-applies the converter's forward formulas to the Meta tensors and checks it gets the HF tensors back.

Goldens (goldens.json in both folders, logits.f32 in the -hf folder):
  logits over the whole vocabulary of lm_head(final hidden state) (HF's own forward overwrites the image
  columns with the float minimum: Chameleon in transformers generates text only) for Anole's CFG pair:
  cond = <s> caption <reserved08706> <racm3:break> codes..., uncond = <s> <racm3:break> codes...
  (chameleon/inference/chameleon.py: ImageDecoder appends <racm3:break>; _split_inputs_for_cfg's
  unconditioned row is [bos, begin_image]); prefill then KV-cache decode steps.
  prompts: the cond ids of a few captions as Anole's TokenManager.tokens_from_ui builds them
  ([bos] + tokenizer.encode(text).ids + [eot]) plus <racm3:break>.
  greedy: Anole's image loop at temperature 0 (CFG 3 against [<s>, <racm3:break>], 1,024 tokens) in
  transformers, and its image through tools/lumina_torch/vqgan.py (tiny-anole-meta/greedy_rgb8, 64 x 64 x 3).

Run: .venv/bin/python tools/goldens/make_anole_tiny.py
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file
from tokenizers import Tokenizer
from transformers import ChameleonConfig, ChameleonForConditionalGeneration
from transformers.cache_utils import DynamicCache

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from tools.lumina_torch.chameleon_vocab import image_token_name  # noqa: E402
from tools.lumina_torch.vqgan import VQModel, chameleon_params, to_uint8, write_yaml  # noqa: E402

TOKENIZER = ROOT / "tests" / "goldens" / "tokenizer" / "chameleon" / "tokenizer.json"
HF_DIR = ROOT / "tests" / "goldens" / "tiny" / "tiny-anole-hf"
META_DIR = ROOT / "tests" / "goldens" / "tiny" / "tiny-anole-meta"
DIM, LAYERS, HEADS, MULTIPLE_OF, NORM_EPS = 16, 2, 2, 16, 1e-5
HEAD_DIM = DIM // HEADS
NUM_CODES = 64
CAPTIONS = ["a red cube", "an orange triangle above a red square", "Two cats.\nOne dog."]
SEED = 30


def intermediate_size(dim: int, ffn_dim_multiplier: float = 1.0, multiple_of: int = MULTIPLE_OF) -> int:
    """The converter's compute_intermediate_size."""
    return multiple_of * ((int(ffn_dim_multiplier * int(8 * dim / 3)) + multiple_of - 1) // multiple_of)


def chameleon_tokenizer() -> dict:
    """The Chameleon test tokenizer, without the merges it learned over image-token names.

    Its BPE learned IMGIMG, IMGIMGB and IMGIMGCD from the image-token strings of its corpus; the
    published vocabulary has no such tokens, and every name with the IMGIMG prefix is an image
    token to Chameleon's VocabInfo and HF's ChameleonImageVocabularyMapping. So those vocabulary
    entries are renamed (unreachable: no merge makes them) and the merges that make or use them
    are dropped; the image tokens themselves are added tokens, matched whole."""
    tok = json.loads(TOKENIZER.read_text())
    added = {t["content"] for t in tok["added_tokens"]}
    vocab = tok["model"]["vocab"]
    learned = [k for k in vocab if k.startswith("IMGIMG") and k not in added]
    for k in learned:
        token_id = vocab.pop(k)
        vocab[f"<unused{token_id}>"] = token_id
    tok["model"]["merges"] = [m for m in tok["model"]["merges"]
                              if not any(part.startswith("IMGIMG") for part in m) and "".join(m) not in learned]
    return tok


def vocabulary(tok_json: dict) -> dict:
    vocab = dict(tok_json["model"]["vocab"])
    for t in tok_json["added_tokens"]:
        vocab[t["content"]] = t["id"]
    return vocab


def hf_to_meta_rows(w: torch.Tensor, heads: int) -> torch.Tensor:
    """Inverse of the converter's permute(): HF's rotate-half rows (k * head_dim/2 + i) back to Meta's
    interleaved rows (2i + k) within each head."""
    out_dim, in_dim = w.shape
    return w.view(heads, 2, out_dim // heads // 2, in_dim).transpose(1, 2).reshape(out_dim, in_dim)


def converter_permute(w: torch.Tensor, heads: int) -> torch.Tensor:
    """The converter's permute for sliced rotary (its formula, restated to check the inverse)."""
    out_dim, in_dim = w.shape
    return w.view(heads, out_dim // heads // 2, 2, in_dim).transpose(1, 2).reshape(out_dim, in_dim)


@torch.no_grad()
def randomize(model: ChameleonForConditionalGeneration, gen: torch.Generator) -> None:
    for name, p in model.named_parameters():
        if name.startswith("model.vqmodel."):
            continue
        if name.endswith("layernorm.weight") or name == "model.norm.weight":
            p.copy_(1.0 + 0.3 * torch.randn(p.shape, generator=gen))
        elif "_norm." in name:  # Meta stores one [head_dim] vector per layer: the same row for every head
            base = 1.0 if name.endswith("weight") else 0.0
            p.copy_((base + 0.3 * torch.randn((1, p.shape[1]), generator=gen)).expand_as(p))
        else:
            p.copy_(0.3 * torch.randn(p.shape, generator=gen))
        p.copy_(p.to(torch.bfloat16).float())  # both layouts store bfloat16: the goldens use exactly those values


def meta_state(hf: dict) -> dict:
    """HF state dict -> Meta's consolidated.pth tensors (bfloat16)."""
    out = {"tok_embeddings.weight": hf["model.embed_tokens.weight"], "norm.weight": hf["model.norm.weight"],
           "output.weight": hf["lm_head.weight"]}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        q = f"layers.{i}."
        out[q + "attention.wq.weight"] = hf_to_meta_rows(hf[p + "self_attn.q_proj.weight"], HEADS)
        out[q + "attention.wk.weight"] = hf_to_meta_rows(hf[p + "self_attn.k_proj.weight"], HEADS)
        out[q + "attention.wv.weight"] = hf[p + "self_attn.v_proj.weight"]
        out[q + "attention.wo.weight"] = hf[p + "self_attn.o_proj.weight"]
        for which in ("q", "k"):
            for part in ("weight", "bias"):
                rows = hf[p + f"self_attn.{which}_norm.{part}"]
                assert torch.equal(rows, rows[:1].expand_as(rows)), "Meta's layout has one norm vector for all heads"
                out[q + f"attention.{which}_normalization.{part}"] = rows[0].view(2, HEAD_DIM // 2).t().reshape(-1)
        out[q + "feed_forward.w1.weight"] = hf[p + "mlp.gate_proj.weight"]
        out[q + "feed_forward.w2.weight"] = hf[p + "mlp.down_proj.weight"]
        out[q + "feed_forward.w3.weight"] = hf[p + "mlp.up_proj.weight"]
        out[q + "attention_norm.weight"] = hf[p + "input_layernorm.weight"]
        out[q + "ffn_norm.weight"] = hf[p + "post_attention_layernorm.weight"]
    return {k: v.to(torch.bfloat16).contiguous() for k, v in out.items()}


def check_converter_roundtrip(meta: dict, hf: dict) -> None:
    """The converter's forward formulas on the Meta tensors give the HF tensors back."""
    for i in range(LAYERS):
        p, q = f"model.layers.{i}.", f"layers.{i}."
        for hf_name, meta_name in (("q_proj", "wq"), ("k_proj", "wk")):
            got = converter_permute(meta[q + f"attention.{meta_name}.weight"].float(), HEADS)
            assert torch.equal(got, hf[p + f"self_attn.{hf_name}.weight"]), (i, hf_name)
        for which in ("q", "k"):
            for part in ("weight", "bias"):
                v = meta[q + f"attention.{which}_normalization.{part}"].float()
                got = v.view(HEAD_DIM // 2, 2).t().reshape(1, -1).repeat_interleave(HEADS, 0)
                assert torch.equal(got, hf[p + f"self_attn.{which}_norm.{part}"]), (i, which, part)


@torch.no_grad()
def tiny_vqgan(gen: torch.Generator) -> VQModel:
    params = chameleon_params(embed_dim=8, n_embed=NUM_CODES, z_channels=8, resolution=64, ch=32, ch_mult=(1, 1),
                              num_res_blocks=1)
    model = VQModel(**params).eval()
    for name, p in model.named_parameters():
        if "norm" in name and name.endswith(".weight"):
            p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=gen))
        elif name.endswith(".bias"):
            p.copy_(0.1 * torch.randn(p.shape, generator=gen))
        elif name == "quantize.embedding.weight":
            p.copy_(torch.randn(p.shape, generator=gen))
    model.params = params
    return model


CFG = 3.0  # Anole's guidance_scale_text; with a text-only prompt its instruct-CFG is plain CFG (docs/anole.md)


@torch.no_grad()
def greedy_image(model, vq: VQModel, cond: list, uncond: list, image_ids: list):
    """Anole's image loop at temperature 0: the CFG pair (cond, [<s>, <racm3:break>]) with KV caches,
    1,024 steps, the argmax of the guided image-token logits fed back to both rows; then the VQGAN."""
    first, count = image_ids[0], len(image_ids)
    caches = [DynamicCache(config=model.config), DynamicCache(config=model.config)]
    last = [hidden_logits(model, torch.tensor([ids]), cache)[0, -1] for ids, cache in zip((cond, uncond), caches)]
    tokens = []
    for _ in range(1024):
        c, u = (x[first:first + count] for x in last)
        token = first + int(torch.argmax(u + CFG * (c - u)))  # torch.argmax: the first maximum
        tokens.append(token)
        last = [hidden_logits(model, torch.tensor([[token]]), cache)[0, -1] for cache in caches]
    codes = torch.tensor([t - first for t in tokens]).view(1, 32, 32)  # the tiny vocabulary's codes are in id order
    vq_f32 = VQModel(**vq.params).eval()
    vq_f32.load_state_dict({k: v.to(torch.bfloat16).float() for k, v in vq.state_dict().items()})
    rgb = to_uint8(vq_f32.decode_code(codes))[0]
    return tokens, rgb


@torch.no_grad()
def hidden_logits(model, ids: torch.Tensor, cache=None) -> torch.Tensor:
    out = model.model(input_ids=ids, past_key_values=cache, use_cache=cache is not None)
    return out.last_hidden_state @ model.lm_head.weight.t()


def main() -> None:
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(SEED)
    tok_json = chameleon_tokenizer()
    vocab = vocabulary(tok_json)
    ids = {n: vocab[n] for n in ("<s>", "<reserved08706>", "<racm3:break>", "<eoss>")}
    image_ids = [vocab[image_token_name(c)] for c in range(NUM_CODES)]
    assert image_ids == list(range(image_ids[0], image_ids[0] + NUM_CODES))

    config_dict = {
        "architectures": ["ChameleonForConditionalGeneration"], "model_type": "chameleon",
        "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": ids["<s>"], "eos_token_id": vocab["</s>"],
        "pad_token_id": vocab["<pad>"], "hidden_act": "silu", "hidden_size": DIM, "initializer_range": 0.02,
        "intermediate_size": intermediate_size(DIM), "max_position_embeddings": 4096, "mlp_bias": False,
        "model_parallel_size": 1, "num_attention_heads": HEADS, "num_hidden_layers": LAYERS,
        "num_key_value_heads": HEADS, "rms_norm_eps": NORM_EPS, "rope_scaling": None, "rope_theta": 10000.0,
        "swin_norm": False, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "use_cache": True,
        "vocab_size": len(vocab), "vocabulary_map": vocab,
        "vq_config": {"model_type": "chameleon_vqgan", "embed_dim": 8, "num_embeddings": NUM_CODES,
                      "double_latent": False, "latent_channels": 8, "resolution": 64, "in_channels": 3,
                      "base_channels": 32, "channel_multiplier": [1, 1], "num_res_blocks": 1, "attn_resolutions": [],
                      "dropout": 0.0, "attn_type": "vanilla"},
    }
    config = ChameleonConfig(**{k: v for k, v in config_dict.items() if k not in ("architectures", "torch_dtype")})
    torch.manual_seed(SEED)
    model = ChameleonForConditionalGeneration(config).eval()
    randomize(model, gen)
    hf = {k: t.detach().float().contiguous() for k, t in model.state_dict().items()}

    # --- the -hf folder (the language model only: argen reads the VQGAN from Meta's vqgan.ckpt) ---
    if HF_DIR.exists():
        shutil.rmtree(HF_DIR)
    HF_DIR.mkdir(parents=True)
    lm = {k: v.to(torch.bfloat16) for k, v in hf.items() if not k.startswith("model.vqmodel.")}
    save_file(lm, str(HF_DIR / "model.safetensors"), metadata={"format": "pt"})
    (HF_DIR / "config.json").write_text(json.dumps(config_dict, indent=1) + "\n")
    (HF_DIR / "tokenizer.json").write_text(json.dumps(tok_json, ensure_ascii=False))
    (HF_DIR / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "LlamaTokenizerFast", "add_bos_token": True, "add_eos_token": False, "bos_token": "<s>",
        "eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>", "sep_token": "<reserved08706>",
        "image_token": "<image>", "boi_token": "<racm3:break>", "eoi_token": "<eoss>", "legacy": False},
        indent=1) + "\n")

    # --- Meta's folder ---
    if META_DIR.exists():
        shutil.rmtree(META_DIR)
    (META_DIR / "models" / "7b").mkdir(parents=True)
    (META_DIR / "tokenizer").mkdir(parents=True)
    meta = meta_state(hf)
    check_converter_roundtrip(meta, hf)
    torch.save(meta, META_DIR / "models" / "7b" / "consolidated.pth")
    params = {"model_parallel_size": 1,
              "model": {"dim": DIM, "n_layers": LAYERS, "n_heads": HEADS, "vocab_size": len(vocab),
                        "multiple_of": MULTIPLE_OF, "ffn_dim_multiplier": 1.0, "norm_eps": NORM_EPS,
                        "rope_theta": 10000.0, "qk_normalization": True, "swin_norm": False}}
    (META_DIR / "models" / "7b" / "params.json").write_text(json.dumps(params, indent=1) + "\n")
    meta_tok = chameleon_tokenizer()  # the converter renamed <reserved08707> to <image>: undo it
    meta_tok["model"]["vocab"] = {("<reserved08707>" if k == "<image>" else k): v
                                  for k, v in meta_tok["model"]["vocab"].items()}
    for t in meta_tok["added_tokens"]:
        if t["content"] == "<image>":
            t["content"] = "<reserved08707>"
    (META_DIR / "tokenizer" / "text_tokenizer.json").write_text(json.dumps(meta_tok, ensure_ascii=False))
    vq = tiny_vqgan(gen)
    write_yaml(str(META_DIR / "tokenizer" / "vqgan.yaml"), vq.params)
    state = {k: v.detach().to(torch.bfloat16).contiguous() for k, v in vq.state_dict().items()}
    torch.save({"epoch": 0, "global_step": 0, "pytorch-lightning_version": "1.9.0", "state_dict": state,
                "optimizer_states": [], "lr_schedulers": []}, META_DIR / "tokenizer" / "vqgan.ckpt")

    # --- goldens ---
    tok = Tokenizer.from_file(str(META_DIR / "tokenizer" / "text_tokenizer.json"))
    caption_ids = tok.encode(CAPTIONS[0]).ids
    codes = [image_ids[c] for c in (0, 63, 7, 31, 12, 5)]
    cond = [ids["<s>"]] + caption_ids + [ids["<reserved08706>"], ids["<racm3:break>"]] + codes
    uncond = [ids["<s>"], ids["<racm3:break>"]] + codes
    sequences = {"cond": (cond, len(cond) - len(codes)), "uncond": (uncond, 2)}
    rows, entries = [], {}
    with torch.no_grad():
        for name, (seq, prefill) in sequences.items():
            x = torch.tensor([seq])
            full = hidden_logits(model, x)
            cache = DynamicCache(config=config)
            pre = hidden_logits(model, x[:, :prefill], cache)
            steps = [hidden_logits(model, x[:, t:t + 1], cache)[0, 0] for t in range(prefill, len(seq))]
            decoded = torch.stack([*pre[0], *steps])
            assert torch.allclose(decoded, full[0], rtol=1e-5, atol=1e-5), name
            entries[name] = {"ids": seq, "prefill": prefill, "first_row": sum(r.shape[0] for r in rows)}
            rows.append(decoded.float())
    logits = torch.cat(rows)
    (HF_DIR / "logits.f32").write_bytes(logits.numpy().astype("<f4").tobytes())
    greedy_tokens, greedy_rgb = greedy_image(model, vq, cond[:len(cond) - len(codes)], uncond[:2], image_ids)
    (META_DIR / "greedy_rgb8").write_bytes(greedy_rgb.numpy().tobytes())
    prompts = [{"caption": c, "ids": [ids["<s>"]] + tok.encode(c).ids + [ids["<reserved08706>"]],
                "uncond_ids": [ids["<s>"], ids["<racm3:break>"]]} for c in CAPTIONS]
    for p in prompts:
        p["ids"].append(ids["<racm3:break>"])
    golden = {
        "generator": "tools/goldens/make_anole_tiny.py",
        "reference": "transformers ChameleonForConditionalGeneration, float32 on the bfloat16 weights, "
                     "lm_head(last hidden state) over the whole vocabulary",
        "vocab_size": len(vocab), "image_token_ids": [image_ids[0], image_ids[-1] + 1],
        "special_ids": ids, "logits_file": "logits.f32", "logits_sum": float(logits.double().sum()),
        "note": "rows [first_row, first_row + prefill) are the prefill logits at every prompt position; row "
                "first_row + prefill + s is decode step s (input ids[prefill + s], KV cache)",
        "sequences": entries, "prompts": prompts,
        "image": {"grid": [32, 32], "pixels": [64, 64]},
        "greedy": {"caption": CAPTIONS[0], "cfg_weight": CFG, "tokens": greedy_tokens, "rgb8_file": "../tiny-anole-meta/greedy_rgb8",
                   "note": "argmax of uncond + cfg (cond - uncond) over the image-token logits (temperature 0), "
                           "1,024 tokens fed back to both rows; the codes decoded by tools/lumina_torch/vqgan.py "
                           "(Chameleon's VQGAN) and converted as Chameleon's _pil_from_chw_tensor"},
    }
    (HF_DIR / "goldens.json").write_text(json.dumps(golden, indent=1) + "\n")
    for d in (HF_DIR, META_DIR):
        size = sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
        print(f"{d.relative_to(ROOT)}: {size / 1e3:.0f} kB")


if __name__ == "__main__":
    main()
