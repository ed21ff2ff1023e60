#!/usr/bin/env python3
"""A tiny random-weight Emu3-Gen in both published layouts, and the references'
outputs for it, for the Emu3 family tests (engine/families/emu3/tests,
engine/emu3vq/tests).

Writes tests/goldens/tiny/tiny-emu3-gen-hf/ (transformers-native, as BAAI/Emu3-Gen-hf):
  config.json            Emu3Config (text_config, vq_config, vocabulary_map) + image_area
  model.safetensors      float32, transformers' tensor names as save_pretrained writes them
                         (text_model.model.*, text_model.lm_head, vqmodel.*), less the image
                         encoder and quant_conv (never read when generating)
  tokenizer.json         GPT-2-style byte-level BPE, made from the tiktoken ranks the way
                         transformers' convert_emu3_weights_to_hf.py makes it (ByteLevel
                         pre-tokenizer with its GPT-2 regex)
and tests/goldens/tiny/tiny-emu3-gen/ (BAAI's own layout, as BAAI/Emu3-Gen + Emu3-VisionTokenizer):
  config.json            Emu3Config as BAAI's remote code spells it (model_type "Emu3")
  model.safetensors      the same decoder weights, BAAI names (model.layers.*, lm_head.weight)
  emu3.tiktoken          base64 token, rank per line
  emu3_vision_tokens.txt <|image token|>, <|image start|>, <|image end|>, <|visual token NNNNNN|>...
  vision_tokenizer/      config.json (model_type Emu3VisionVQ) and model.safetensors with
                         BAAI's names (decoder.mid.*, decoder.up.*, 1x1-conv attention)
and tests/goldens/tiny/emu3-goldens/:
  goldens.json, logits.f32   decoder logits (transformers Emu3ForConditionalGeneration, fp32) of a
                             cond / uncond pair: prefill rows at every prompt position, then one row
                             per decode step through the KV cache (forced row ends included)
  pixels.f32                 Emu3VQVAE.decode(codes)[:, 0] (frame 0 of the 4-frame video), [3, H, W]
  tokens.json                ids of tools/sweep/benchmark_prompts.jsonl: tiktoken with the Qwen
                             pattern (the BAAI tokenizer) and HF tokenizers on tokenizer.json (-hf)

The vocabulary is synthetic and tiny (256 bytes + merges learnt on the benchmark
prompts), laid out as Emu3's: the special tokens follow the ranks (<|endoftext|>,
<|im_start|>, <|im_end|>, <|extra_0..204|>), then the vision tokens file. BAAI's
tokenizer hard-codes the first special id 151643 (= the real rank count); here it
is the tiny rank count, as tiktoken's own no-gaps check demands.

Run: /work/main/.venv/bin/python tools/goldens/make_emu3_goldens.py
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import tiktoken
import torch
from safetensors.torch import load_file, save_file
from tokenizers import Tokenizer as HfTokenizer
from transformers import Emu3Config, Emu3ForConditionalGeneration

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests/goldens/tiny"
HF_DIR = OUT / "tiny-emu3-gen-hf"
BAAI_DIR = OUT / "tiny-emu3-gen"
GOLDEN_DIR = OUT / "emu3-goldens"

QWEN_PATTERN = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
                r"""|\s*[\r\n]+|\s+(?!\S)|\s+""")
CODEBOOK = 64
MERGES = 120
IMAGE_AREA = 32 * 32  # 4 x 4 codes at 8 px a code
POSITIVE = " masterpiece, film grained, best quality."
NEGATIVE = ("lowres, bad anatomy, bad hands, text, error, missing fingers, extra digit, fewer digits, cropped, "
            "worst quality, low quality, normal quality, jpeg artifacts, signature, watermark, username, blurry.")


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def learn_ranks(prompts: list[str]) -> dict[bytes, int]:
    """Byte-level BPE learnt on the prompts' Qwen-pattern pieces: every token merges two earlier ones."""
    ranks = {bytes([b]): b for b in range(256)}
    import regex  # noqa: the tiktoken pattern needs \\p classes

    words = Counter()
    for p in prompts + [POSITIVE, NEGATIVE, "32*32 24*40 40*24"]:
        for piece in regex.findall(QWEN_PATTERN, p):
            words[tuple(bytes([b]) for b in piece.encode())] += 1
    for _ in range(MERGES):
        pairs = Counter()
        for w, n in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += n
        if not pairs:
            break
        (a, b), _ = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        ranks[a + b] = len(ranks)
        merged = Counter()
        for w, n in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] += n
        words = merged
    return ranks


def special_tokens(first: int) -> dict[str, int]:
    names = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] + [f"<|extra_{i}|>" for i in range(205)]
    names += vision_token_lines()
    return {n: first + i for i, n in enumerate(names)}


def vision_token_lines() -> list[str]:
    return ["<|image token|>", "<|image start|>", "<|image end|>"] + [
        f"<|visual token {k:06d}|>" for k in range(CODEBOOK)]


def bpe_split(ranks, token: bytes, max_rank: int):
    parts = [bytes([b]) for b in token]
    while True:
        best = None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and (best is None or r < best[1]):
                best = (i, r)
        if best is None or best[1] >= max_rank:
            break
        i = best[0]
        parts = parts[:i] + [parts[i] + parts[i + 1]] + parts[i + 2:]
    return parts


def hf_tokenizer_json(ranks, specials) -> dict:
    """tokenizer.json as transformers' Emu3 conversion writes it from the tiktoken ranks."""
    enc = bytes_to_unicode()
    to_str = lambda b: "".join(enc[x] for x in b)  # noqa: E731
    vocab, merges = {}, []
    for token, rank in ranks.items():
        vocab[to_str(token)] = rank
        if len(token) > 1:
            a, b = bpe_split(ranks, token, rank)
            merges.append(f"{to_str(a)} {to_str(b)}")
    vocab.update(specials)
    added = [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for c, i in specials.items()]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added, "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "vocab": vocab,
                  "merges": merges},
    }


def hf_to_baai_vq(name: str) -> str | None:
    """transformers' Emu3VQVAE name -> BAAI's Emu3VisionVQModel name (decode path and codebook)."""
    n = name
    n = n.replace("decoder.middle_block.attn_norm.", "decoder.mid.attn_1.norm.")
    n = n.replace("decoder.middle_block.", "decoder.mid.")
    n = re.sub(r"decoder\.up_block\.up\.(\d+)\.attn_norms\.(\d+)\.", r"decoder.up.\1.attn.\2.norm.", n)
    n = n.replace("decoder.up_block.up.", "decoder.up.")
    for hf, baai in (("q_proj", "q"), ("k_proj", "k"), ("v_proj", "v"), ("out_proj", "proj_out")):
        n = re.sub(rf"(attn(_1|\.\d+))\.{hf}\.", rf"\1.{baai}.", n)
    return n


def main() -> int:
    torch.manual_seed(29)
    prompts = [json.loads(l)["prompt"] for l in (ROOT / "tools/sweep/benchmark_prompts.jsonl").read_text().splitlines()
               if l.strip()]
    ranks = learn_ranks(prompts)
    specials = special_tokens(len(ranks))
    vocab_size = len(ranks) + len(specials)
    ids = specials
    first_visual = ids["<|visual token 000000|>"]

    for d in (HF_DIR, BAAI_DIR, GOLDEN_DIR):
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)

    # --- tokenizers -------------------------------------------------------------------------
    tok_json = hf_tokenizer_json(ranks, specials)
    (HF_DIR / "tokenizer.json").write_text(json.dumps(tok_json, ensure_ascii=False, indent=1))
    (HF_DIR / "tokenizer_config.json").write_text(json.dumps({
        "bos_token": "<|extra_203|>", "eos_token": "<|extra_204|>", "pad_token": "<|endoftext|>",
        "tokenizer_class": "GPT2Tokenizer"}, indent=1))
    (BAAI_DIR / "emu3.tiktoken").write_text(
        "".join(f"{base64.b64encode(t).decode()} {r}\n" for t, r in ranks.items()))
    (BAAI_DIR / "emu3_vision_tokens.txt").write_text("\n".join(vision_token_lines()) + "\n")
    tk = tiktoken.Encoding("Emu3", pat_str=QWEN_PATTERN, mergeable_ranks=ranks, special_tokens=specials)
    hf_tok = HfTokenizer.from_file(str(HF_DIR / "tokenizer.json"))
    texts = prompts + [p + POSITIVE for p in prompts[:20]] + [NEGATIVE, "32*32", "4*4", "3*5"]
    tokens = {"texts": texts,
              "baai": [tk.encode(t, disallowed_special=()) for t in texts],
              "hf": [hf_tok.encode(t, add_special_tokens=False).ids for t in texts]}
    tokens["differ"] = [i for i, (a, b) in enumerate(zip(tokens["baai"], tokens["hf"])) if a != b]
    (GOLDEN_DIR / "tokens.json").write_text(json.dumps(tokens, ensure_ascii=False))

    # --- the model --------------------------------------------------------------------------
    vq_config = dict(codebook_size=CODEBOOK, embed_dim=4, latent_channels=4, double_latent=False, in_channels=3,
                     out_channels=3, temporal_downsample_factor=4, base_channels=32, channel_multiplier=[1, 1, 1, 2],
                     num_res_blocks=1, attn_resolutions=[3], hidden_size=64, num_attention_heads=1)
    text_config = dict(vocab_size=vocab_size, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                       num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                       rms_norm_eps=1e-5, pad_token_id=ids["<|endoftext|>"], bos_token_id=ids["<|extra_203|>"],
                       eos_token_id=ids["<|extra_204|>"],
                       rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})
    vocabulary_map = dict(tok_json["model"]["vocab"])
    config = Emu3Config(text_config=text_config, vq_config=vq_config, vocabulary_map=vocabulary_map)
    model = Emu3ForConditionalGeneration(config).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.ndim == 1 and ("norm" in name and "running" not in name) and name.endswith("weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif p.ndim == 1:
                p.copy_(0.05 * torch.randn_like(p))
            else:
                p.copy_(torch.randn_like(p) * (1.0 / max(1, p.shape[1] if p.ndim > 1 else 1)) ** 0.5)
        for name, buf in model.named_buffers():
            if name.endswith("running_mean"):
                buf.copy_(0.1 * torch.randn_like(buf))
            elif name.endswith("running_var"):
                buf.copy_(0.5 + torch.rand_like(buf))
    model.save_pretrained(HF_DIR, safe_serialization=True)
    # The image encoder (and quant_conv) is never read when generating: left out of the
    # committed files to keep them small (a published checkpoint has it; the loader ignores it).
    saved = load_file(str(HF_DIR / "model.safetensors"))
    saved = {k: v for k, v in saved.items() if not re.match(r"^(model\.)?vqmodel\.(encoder|quant_conv)\.", k)}
    save_file(saved, str(HF_DIR / "model.safetensors"), metadata={"format": "pt"})
    cfg = json.loads((HF_DIR / "config.json").read_text())
    cfg["image_area"] = IMAGE_AREA
    (HF_DIR / "config.json").write_text(json.dumps(cfg, indent=1, ensure_ascii=False))
    for extra in ("generation_config.json",):
        (HF_DIR / extra).unlink(missing_ok=True)

    # BAAI layout: the decoder under its own names, the vision tokenizer beside it.
    hf_state = load_file(str(HF_DIR / "model.safetensors"))
    lm, vq = {}, {}
    for name, t in hf_state.items():
        m = re.match(r"^(model\.)?text_model\.(model\.)?(.*)$", name)
        if name in ("lm_head.weight", "text_model.lm_head.weight"):
            lm["lm_head.weight"] = t
        elif m:
            lm["model." + m.group(3)] = t
        else:
            m = re.match(r"^(model\.)?vqmodel\.(.*)$", name)
            assert m, name
            baai = hf_to_baai_vq(m.group(2))
            if re.search(r"attn(_1|\.\d+)\.(q|k|v|proj_out)\.weight$", baai):
                t = t.reshape(*t.shape, 1, 1)  # Linear -> 1x1 conv
            vq[baai] = t.contiguous()
    save_file(lm, str(BAAI_DIR / "model.safetensors"), metadata={"format": "pt"})
    baai_cfg = dict(architectures=["Emu3ForCausalLM"], model_type="Emu3", vocab_size=vocab_size, hidden_size=64,
                    intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                    hidden_act="silu", max_position_embeddings=512, rms_norm_eps=1e-5,
                    pad_token_id=ids["<|endoftext|>"], bos_token_id=ids["<|extra_203|>"],
                    eos_token_id=ids["<|extra_204|>"], img_token_id=ids["<|image token|>"],
                    boi_token_id=ids["<|image start|>"], eoi_token_id=ids["<|image end|>"],
                    eol_token_id=ids["<|extra_200|>"], eof_token_id=ids["<|extra_201|>"], image_area=IMAGE_AREA,
                    rope_theta=1000000.0, rope_scaling=None, tie_word_embeddings=False, torch_dtype="float32")
    (BAAI_DIR / "config.json").write_text(json.dumps(baai_cfg, indent=1))
    (BAAI_DIR / "vision_tokenizer").mkdir()
    save_file(vq, str(BAAI_DIR / "vision_tokenizer/model.safetensors"), metadata={"format": "pt"})
    (BAAI_DIR / "vision_tokenizer/config.json").write_text(json.dumps(dict(
        architectures=["Emu3VisionVQModel"], model_type="Emu3VisionVQ", codebook_size=CODEBOOK, embed_dim=4,
        z_channels=4, double_z=False, in_channels=3, out_channels=3, temporal_downsample_factor=4, ch=32,
        ch_mult=[1, 1, 1, 2], num_res_blocks=1, attn_resolutions=[3], dropout=0.0), indent=1))

    # --- logits: a cond / uncond pair as the family builds it (4 x 4 codes) ------------------
    h, w = 4, 4
    header = [ids["<|image start|>"]] + tk.encode(f"{h}*{w}") + [ids["<|image token|>"]]
    cond_prompt = [ids["<|extra_203|>"]] + tk.encode("a photo of a circle" + POSITIVE) + header
    uncond_prompt = [ids["<|extra_203|>"]] + tk.encode(NEGATIVE) + header
    g = torch.Generator().manual_seed(7)
    steps = []
    for t in range(2 * (w + 1)):  # two rows, with their forced row ends
        steps.append(ids["<|extra_200|>"] if t % (w + 1) == w else first_visual + int(torch.randint(0, CODEBOOK, (1,), generator=g)))
    rows, seqs = [], {}
    for key, prompt in (("cond", cond_prompt), ("uncond", uncond_prompt)):
        seq = prompt + steps
        with torch.no_grad():
            out = model(input_ids=torch.tensor([prompt]), use_cache=True)
            block = [out.logits[0]]
            cache = out.cache if hasattr(out, "cache") else out.past_key_values
            for s, tok in enumerate(steps):
                o = model(input_ids=torch.tensor([[tok]]), cache=cache, use_cache=True)
                cache = o.cache if hasattr(o, "cache") else o.past_key_values
                block.append(o.logits[0])
            full = model(input_ids=torch.tensor([seq])).logits[0]
        stacked = torch.cat(block, 0)
        assert torch.allclose(stacked, full, atol=1e-4, rtol=1e-4), key
        seqs[key] = {"ids": seq, "prefill": len(prompt), "first_row": sum(r.shape[0] for r in rows),
                     "rows": stacked.shape[0]}
        rows.append(stacked)
    logits = torch.cat(rows, 0).float().numpy()
    logits.astype("<f4").tofile(GOLDEN_DIR / "logits.f32")

    # --- vision decoder: frame 0 of a 3 x 5 grid (non-square) ---------------------------------
    codes = torch.randint(0, CODEBOOK, (1, 3, 5), generator=g)
    with torch.no_grad():
        pixels = model.model.vqmodel.decode(codes)[0]  # image input: frame 0 of the decoded video
        video = model.model.vqmodel.decode(codes.unsqueeze(1))[0]
    assert torch.equal(pixels, video[0])
    pixels.float().numpy().astype("<f4").tofile(GOLDEN_DIR / "pixels.f32")

    golden = {
        "generator": "tools/goldens/make_emu3_goldens.py",
        "reference": "transformers %s Emu3ForConditionalGeneration / Emu3VQVAE, float32" % __import__("transformers").__version__,
        "vocab_size": vocab_size, "first_visual_id": first_visual, "codebook_size": CODEBOOK,
        "ids": {k: ids[k] for k in ("<|endoftext|>", "<|extra_200|>", "<|extra_201|>", "<|extra_203|>",
                                    "<|extra_204|>", "<|image token|>", "<|image start|>", "<|image end|>")},
        "logits_file": "logits.f32",
        "note": "rows [first_row, first_row + prefill) are the prefill logits at every prompt position; row "
                "first_row + prefill + s is decode step s (input ids[prefill + s], KV cache)",
        "sequences": seqs,
        "prompts": {"caption": "a photo of a circle", "cond": cond_prompt, "uncond": uncond_prompt},
        "pixels": {"file": "pixels.f32", "height": 3, "width": 5, "codes": codes[0].flatten().tolist(),
                   "shape": list(pixels.shape)},
        "tokens_differ": len(tokens["differ"]),
    }
    (GOLDEN_DIR / "goldens.json").write_text(json.dumps(golden, indent=1))
    print(f"vocab {vocab_size}, first visual {first_visual}; tokenizers differ on {len(tokens['differ'])} of "
          f"{len(texts)} texts; files: {sorted(p.name for p in HF_DIR.iterdir())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
