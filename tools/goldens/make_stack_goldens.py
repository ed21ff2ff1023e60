#!/usr/bin/env python3
"""Writes tests/goldens/stack/: tiny random checkpoints with HF Chameleon
tensor names and the reference logits of the decoder-stack switches the
engine implements (engine/model/model_spec.h), for engine/cpu/tests and the
CUDA backend's gpu tests.

Run with the development Python:  .venv/bin/python tools/goldens/make_stack_goldens.py

Reference: HF transformers' ChameleonModel (fp32, eager attention): QK-norm
(ChameleonLayerNorm over head_dim with weight and bias [heads, head_dim])
before RoPE, pre-norm (ChameleonDecoderLayer) or swin-norm
(ChameleonSwinDecoderLayer), GQA, SwiGLU, RMSNorm. The LayerNorm switch (block
and final norms with weight and bias) has no HF model with these exact
modules, so it comes from a PyTorch restatement of the stack in this file,
which is first checked against ChameleonModel on both Chameleon cases
(max |diff| < 1e-5) and against HF LlamaModel on a plain pre-norm case.

The output head is lm_head restricted to rows [LOGIT_BEGIN, LOGIT_BEGIN +
LOGIT_COUNT) (the "logits restricted to an id range" stage); decode steps feed
embed_tokens rows by id (some outside the logit range, as forced tokens are).
Each row runs alone in HF (batch 1, its own cache); the C++ tests run them as
CFG pairs in batches, the second pair joining later.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from transformers import ChameleonConfig, ChameleonModel, LlamaConfig, LlamaModel

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "tests" / "goldens" / "stack"

HIDDEN, INTER, LAYERS, HEADS, VOCAB = 64, 96, 2, 4, 80
LOGIT_BEGIN, LOGIT_COUNT = 16, 48
EPS, QK_EPS = 1e-5, 1e-5  # rms_norm_eps; ChameleonLayerNorm fixes 1e-5

PAIRS = [
    {"cond": [1, 17, 50, 33, 61, 7, 2], "uncond": [1, 0, 0, 0, 0, 0, 2], "inputs": [20, 63, 79, 17, 42]},
    {"cond": [1, 30, 12, 44, 9, 71, 77, 3, 5, 2], "uncond": [1, 0, 0, 0, 0, 0, 0, 0, 0, 2],
     "inputs": [33, 8, 60]},
]

CASES = [
    # name, kv_heads, norm, qk_norm, swin_norm, rope_theta, reference
    ("chameleon_prenorm_gqa", 2, "rms", True, False, 10000.0, "hf"),
    ("chameleon_swin_mha", 4, "rms", True, True, 500000.0, "hf"),
    ("layernorm_prenorm_gqa", 2, "layer", False, False, 10000.0, "restatement"),
]


def random_weights(kv_heads: int, norm: str, qk_norm: bool, seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    hd = HIDDEN // HEADS

    def rnd(*shape, scale=0.08):
        return torch.randn(*shape, generator=g) * scale

    def norm_weight(n):
        return 1.0 + rnd(n, scale=0.1)

    w = {"model.embed_tokens.weight": rnd(VOCAB, HIDDEN, scale=0.5), "lm_head.weight": rnd(VOCAB, HIDDEN, scale=0.3)}
    for i in range(LAYERS):
        p = f"model.layers.{i}."
        w[p + "self_attn.q_proj.weight"] = rnd(HEADS * hd, HIDDEN, scale=0.15)
        w[p + "self_attn.k_proj.weight"] = rnd(kv_heads * hd, HIDDEN, scale=0.15)
        w[p + "self_attn.v_proj.weight"] = rnd(kv_heads * hd, HIDDEN, scale=0.15)
        w[p + "self_attn.o_proj.weight"] = rnd(HIDDEN, HEADS * hd)
        w[p + "mlp.gate_proj.weight"] = rnd(INTER, HIDDEN, scale=0.12)
        w[p + "mlp.up_proj.weight"] = rnd(INTER, HIDDEN, scale=0.12)
        w[p + "mlp.down_proj.weight"] = rnd(HIDDEN, INTER, scale=0.1)
        for n in ("input_layernorm", "post_attention_layernorm"):
            w[p + n + ".weight"] = norm_weight(HIDDEN)
            if norm == "layer":
                w[p + n + ".bias"] = rnd(HIDDEN, scale=0.05)
        if qk_norm:
            for n, heads in (("q_norm", HEADS), ("k_norm", kv_heads)):
                w[p + f"self_attn.{n}.weight"] = norm_weight(heads * hd).view(heads, hd)
                w[p + f"self_attn.{n}.bias"] = rnd(heads, hd, scale=0.05)
    w["model.norm.weight"] = norm_weight(HIDDEN)
    if norm == "layer":
        w["model.norm.bias"] = rnd(HIDDEN, scale=0.05)
    # Stored as bf16 (half the bytes); the references compute in f32 from the same rounded values.
    return {k: v.to(torch.bfloat16).to(torch.float32).contiguous() for k, v in w.items()}


class Stack(torch.nn.Module):
    """The engine's stack, restated: every switch of engine/model/model_spec.h."""

    def __init__(self, w: dict, kv_heads: int, norm: str, qk_norm: bool, swin: bool, theta: float):
        super().__init__()
        self.w, self.kv_heads, self.norm_kind, self.qk_norm, self.swin = w, kv_heads, norm, qk_norm, swin
        hd = HIDDEN // HEADS
        self.inv_freq = 1.0 / (theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))

    def norm(self, x, prefix):
        if self.norm_kind == "rms":
            return self.w[prefix + ".weight"] * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS))
        return F.layer_norm(x, (HIDDEN,), self.w[prefix + ".weight"], self.w[prefix + ".bias"], EPS)

    def rope(self, x, positions):  # x [heads, tokens, hd]
        freqs = positions[:, None].float() * self.inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        half = x.shape[-1] // 2
        rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
        return x * cos + rotated * sin

    def attention(self, x, p, cache, positions):
        hd = HIDDEN // HEADS
        t = x.shape[0]
        q = (x @ self.w[p + "self_attn.q_proj.weight"].T).view(t, HEADS, hd)
        k = (x @ self.w[p + "self_attn.k_proj.weight"].T).view(t, self.kv_heads, hd)
        v = (x @ self.w[p + "self_attn.v_proj.weight"].T).view(t, self.kv_heads, hd)
        if self.qk_norm:
            q = F.layer_norm(q, (hd,), None, None, QK_EPS) * self.w[p + "self_attn.q_norm.weight"] + \
                self.w[p + "self_attn.q_norm.bias"]
            k = F.layer_norm(k, (hd,), None, None, QK_EPS) * self.w[p + "self_attn.k_norm.weight"] + \
                self.w[p + "self_attn.k_norm.bias"]
        q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)
        q, k = self.rope(q, positions), self.rope(k, positions)
        if cache is not None:
            k = torch.cat((cache[0], k), dim=1)
            v = torch.cat((cache[1], v), dim=1)
        new_cache = (k, v)
        group = HEADS // self.kv_heads
        k, v = k.repeat_interleave(group, dim=0), v.repeat_interleave(group, dim=0)
        scores = (q @ k.transpose(1, 2)) / (hd ** 0.5)
        n_past = k.shape[1] - t
        mask = torch.ones(t, k.shape[1], dtype=torch.bool).tril(diagonal=n_past)
        scores = scores.masked_fill(~mask, float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v
        out = out.transpose(0, 1).reshape(t, HEADS * hd)
        return out @ self.w[p + "self_attn.o_proj.weight"].T, new_cache

    def mlp(self, x, p):
        return (F.silu(x @ self.w[p + "mlp.gate_proj.weight"].T) * (x @ self.w[p + "mlp.up_proj.weight"].T)) @ \
            self.w[p + "mlp.down_proj.weight"].T

    def forward(self, ids, caches, start):
        x = self.w["model.embed_tokens.weight"][torch.tensor(ids)]
        positions = torch.arange(start, start + len(ids))
        new = []
        for i in range(LAYERS):
            p = f"model.layers.{i}."
            if self.swin:
                a, c = self.attention(x, p, caches[i] if caches else None, positions)
                h = x + self.norm(a, p + "input_layernorm")
                x = h + self.norm(self.mlp(h, p), p + "post_attention_layernorm")
            else:
                a, c = self.attention(self.norm(x, p + "input_layernorm"), p, caches[i] if caches else None, positions)
                h = x + a
                x = h + self.mlp(self.norm(h, p + "post_attention_layernorm"), p)
            new.append(c)
        return self.norm(x, "model.norm"), new


def head(w: dict, hidden: torch.Tensor) -> torch.Tensor:
    return hidden @ w["lm_head.weight"][LOGIT_BEGIN:LOGIT_BEGIN + LOGIT_COUNT].T


@torch.inference_mode()
def run_restatement(stack: Stack, ids: list, inputs: list) -> list:
    hidden, caches = stack(ids, None, 0)
    logits = [head(stack.w, hidden[-1])]
    pos = len(ids)
    for tok in inputs:
        hidden, caches = stack([tok], caches, pos)
        pos += 1
        logits.append(head(stack.w, hidden[-1]))
    return logits


def hf_chameleon(w: dict, kv_heads: int, swin: bool, theta: float) -> ChameleonModel:
    cfg = ChameleonConfig(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=INTER, num_hidden_layers=LAYERS,
        num_attention_heads=HEADS, num_key_value_heads=kv_heads, rms_norm_eps=EPS,
        rope_parameters={"rope_type": "default", "rope_theta": theta}, swin_norm=swin,
        max_position_embeddings=256, vocabulary_map={"<image>": VOCAB - 1},
        vq_config={"embed_dim": 4, "num_embeddings": 16, "latent_channels": 4, "base_channels": 32,
                   "channel_multiplier": [1], "num_res_blocks": 1, "resolution": 16, "attn_resolutions": []},
        attn_implementation="eager")
    model = ChameleonModel(cfg).to(torch.float32).eval()
    state = {k[len("model."):]: v for k, v in w.items() if k.startswith("model.")}
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected, unexpected
    assert all(m.startswith("vqmodel.") or "rotary" in m for m in missing), missing
    return model


def hf_llama(w: dict, kv_heads: int, theta: float) -> LlamaModel:
    cfg = LlamaConfig(hidden_size=HIDDEN, intermediate_size=INTER, num_hidden_layers=LAYERS,
                      num_attention_heads=HEADS, num_key_value_heads=kv_heads, rms_norm_eps=EPS, vocab_size=VOCAB,
                      rope_theta=theta, max_position_embeddings=256, attn_implementation="eager")
    model = LlamaModel(cfg).to(torch.float32).eval()
    state = {k[len("model."):]: v for k, v in w.items() if k.startswith("model.")}
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected, unexpected
    return model


@torch.inference_mode()
def run_hf(model, w: dict, ids: list, inputs: list) -> list:
    out = model(input_ids=torch.tensor([ids]), use_cache=True)
    cache = out.past_key_values if hasattr(out, "past_key_values") and out.past_key_values is not None else out.cache
    logits = [head(w, out.last_hidden_state[0, -1])]
    for tok in inputs:
        out = model(input_ids=torch.tensor([[tok]]), past_key_values=cache, use_cache=True)
        cache = out.past_key_values if getattr(out, "past_key_values", None) is not None else out.cache
        logits.append(head(w, out.last_hidden_state[0, -1]))
    return logits


def max_diff(a: list, b: list) -> float:
    return max(float((x - y).abs().max()) for x, y in zip(a, b))


def check_restatement() -> None:
    """The restatement equals HF on every switch HF has."""
    for kv, swin, theta in ((2, False, 10000.0), (4, True, 500000.0)):
        w = random_weights(kv, "rms", True, seed=99)
        stack, model = Stack(w, kv, "rms", True, swin, theta), hf_chameleon(w, kv, swin, theta)
        for p in PAIRS:
            d = max_diff(run_restatement(stack, p["cond"], p["inputs"]), run_hf(model, w, p["cond"], p["inputs"]))
            assert d < 1e-5, f"restatement vs ChameleonModel (swin {swin}): {d}"
    w = random_weights(2, "rms", False, seed=98)
    stack, model = Stack(w, 2, "rms", False, False, 10000.0), hf_llama(w, 2, 10000.0)
    for p in PAIRS:
        d = max_diff(run_restatement(stack, p["cond"], p["inputs"]), run_hf(model, w, p["cond"], p["inputs"]))
        assert d < 1e-5, f"restatement vs LlamaModel: {d}"


def main() -> None:
    torch.manual_seed(0)
    check_restatement()
    OUT.mkdir(parents=True, exist_ok=True)
    for index, (name, kv, norm, qk, swin, theta, reference) in enumerate(CASES):
        w = random_weights(kv, norm, qk, seed=index + 1)
        if reference == "hf":
            model = hf_chameleon(w, kv, swin, theta)
            run = lambda ids, inputs: run_hf(model, w, ids, inputs)  # noqa: E731
        else:
            stack = Stack(w, kv, norm, qk, swin, theta)
            run = lambda ids, inputs: run_restatement(stack, ids, inputs)  # noqa: E731
        directory = OUT / name
        directory.mkdir(exist_ok=True)
        save_file({k: v.to(torch.bfloat16) for k, v in w.items()}, str(directory / "model.safetensors"))
        pairs = []
        for p in PAIRS:
            cond, uncond = run(p["cond"], p["inputs"]), run(p["uncond"], p["inputs"])
            pairs.append({"cond_ids": p["cond"], "uncond_ids": p["uncond"], "inputs": p["inputs"],
                          "cond_logits": [l.tolist() for l in cond], "uncond_logits": [l.tolist() for l in uncond]})
        golden = {
            "name": name, "checkpoint": f"tests/goldens/stack/{name}", "reference": reference,
            "config": {"hidden_size": HIDDEN, "intermediate_size": INTER, "num_layers": LAYERS, "num_heads": HEADS,
                       "num_kv_heads": kv, "vocab_size": VOCAB, "norm": norm, "norm_eps": EPS, "qk_norm": qk,
                       "qk_norm_eps": QK_EPS, "swin_norm": swin, "rope_theta": theta},
            "logit_begin": LOGIT_BEGIN, "logit_count": LOGIT_COUNT, "pairs": pairs,
        }
        (OUT / f"{name}.json").write_text(json.dumps(golden) + "\n")
        print(f"wrote {name} ({reference})")


if __name__ == "__main__":
    main()
