#!/usr/bin/env python3
"""Writes tests/goldens/llama/*.json: reference outputs of the Janus-Pro
generation path on the tiny checkpoints, for engine/cpu/tests.

Run with the development Python:  .venv/bin/python tools/goldens/make_llama_goldens.py

Reference: HF transformers' LlamaModel (the language_model of
LlamaForCausalLM, fp32, eager attention) loaded from the checkpoint's
language_model.model.* tensors, and the official Janus generation heads
written out in PyTorch (janus/models/modeling_vlm.py, projector.py):
  gen_aligner = Linear(8 -> H), GELU, Linear(H -> H)      (layers.0, layers.2)
  gen_head    = output_mlp_projector, GELU, vision_head
  input of image token t = gen_aligner(gen_embed(t))
Each row is run alone in HF (batch 1, its own KV cache): prompt prefill with
input_ids, gen_head on the last position, then decode steps with
inputs_embeds of fixed image tokens, gen_head after each step. The C++ test
runs the same rows batched, pairs joining at different steps.

For the first pair's cond row it also records every decode step's attention
weights (output_attentions, eager) per layer and head, for the CPU
backend's attention observer.

Also records the CFG sampling distributions of engine/model/sampler.h
computed with torch ops (softmax(logits / T) with top-k / top-p thresholds).

Cases: tiny-mha (MHA), tiny-gqa-sharded (GQA), and tiny-gqa-sharded with
rope_theta overridden to 500000 (the C++ test overrides it the same way).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import load_file
from transformers import LlamaConfig, LlamaModel

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "tests" / "goldens" / "tiny"
OUT = ROOT / "tests" / "goldens" / "llama"

# Two CFG pairs of different prompt lengths (cond row, uncond row), token ids
# inside the tiny text vocabulary (512); the pair's image tokens per decode step.
PAIRS = [
    {"cond": [1, 17, 250, 33, 101, 7, 480, 2], "uncond": [1, 0, 0, 0, 0, 0, 0, 2],
     "image_tokens": [5, 63, 0, 17, 42]},
    {"cond": [1, 300, 12, 44, 9, 511, 77, 3, 150, 61, 2],
     "uncond": [1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2], "image_tokens": [33, 8, 60]},
]
SAMPLING = [
    {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "cfg_weight": 5.0},
    {"temperature": 0.7, "top_k": 10, "top_p": 1.0, "cfg_weight": 3.0},
    {"temperature": 1.3, "top_k": 0, "top_p": 0.8, "cfg_weight": 5.0},
    {"temperature": 1.0, "top_k": 20, "top_p": 0.5, "cfg_weight": 1.5},
]


def load_checkpoint(directory: Path) -> dict:
    tensors = {}
    for f in sorted(directory.glob("*.safetensors")):
        tensors.update(load_file(str(f)))
    return {k: v.to(torch.float32) for k, v in tensors.items()}


def language_model(config: dict, weights: dict, rope_theta: float) -> LlamaModel:
    lc = config["language_config"]
    cfg = LlamaConfig(
        hidden_size=lc["hidden_size"], intermediate_size=lc["intermediate_size"],
        num_hidden_layers=lc["num_hidden_layers"], num_attention_heads=lc["num_attention_heads"],
        num_key_value_heads=lc.get("num_key_value_heads", lc["num_attention_heads"]),
        rms_norm_eps=lc.get("rms_norm_eps", 1e-6), rope_theta=rope_theta,
        vocab_size=lc["vocab_size"], max_position_embeddings=lc.get("max_position_embeddings", 2048),
        attn_implementation="eager", torch_dtype=torch.float32)
    model = LlamaModel(cfg).to(torch.float32).eval()
    prefix = "language_model.model."
    state = {k[len(prefix):]: v for k, v in weights.items() if k.startswith(prefix)}
    missing, unexpected = model.load_state_dict(state, strict=False)
    assert not unexpected, unexpected
    assert all("rotary" in m for m in missing), missing
    return model


def gen_head(w: dict, hidden: torch.Tensor) -> torch.Tensor:
    x = torch.nn.functional.linear(hidden, w["gen_head.output_mlp_projector.weight"],
                                   w["gen_head.output_mlp_projector.bias"])
    x = torch.nn.functional.gelu(x)
    return torch.nn.functional.linear(x, w["gen_head.vision_head.weight"], w["gen_head.vision_head.bias"])


def gen_input(w: dict, token: int) -> torch.Tensor:
    e = w["gen_embed.weight"][token]
    x = torch.nn.functional.linear(e, w["gen_aligner.layers.0.weight"], w["gen_aligner.layers.0.bias"])
    x = torch.nn.functional.gelu(x)
    return torch.nn.functional.linear(x, w["gen_aligner.layers.2.weight"], w["gen_aligner.layers.2.bias"])


@torch.inference_mode()
def run_row(model: LlamaModel, w: dict, ids: list, image_tokens: list, attentions: list | None = None) -> list:
    """gen_head logits after prefill and after each decode step; optionally
    appends each decode step's attention weights [layer][head][key]."""
    out = model(input_ids=torch.tensor([ids]), use_cache=True)
    logits = [gen_head(w, out.last_hidden_state[0, -1])]
    past = out.past_key_values
    for tok in image_tokens:
        emb = gen_input(w, tok).view(1, 1, -1)
        out = model(inputs_embeds=emb, past_key_values=past, use_cache=True,
                    output_attentions=attentions is not None)
        past = out.past_key_values
        logits.append(gen_head(w, out.last_hidden_state[0, -1]))
        if attentions is not None:
            attentions.append([layer[0, :, -1, :].tolist() for layer in out.attentions])
    return logits


def sampling_probs(cond: torch.Tensor, uncond: torch.Tensor, s: dict) -> torch.Tensor:
    logits = (uncond + s["cfg_weight"] * (cond - uncond)) / s["temperature"]
    logits = logits.double()
    if s["top_k"] > 0:
        kth = torch.topk(logits, s["top_k"]).values[-1]
        logits = torch.where(logits >= kth, logits, torch.tensor(float("-inf"), dtype=logits.dtype))
    probs = torch.softmax(logits, dim=-1)
    if s["top_p"] < 1.0:
        desc = torch.sort(probs, descending=True).values
        cum = torch.cumsum(desc, dim=0)
        idx = int(torch.nonzero(cum >= s["top_p"])[0]) if bool((cum >= s["top_p"]).any()) else len(desc) - 1
        floor = desc[idx]
        probs = torch.where(probs >= floor, probs, torch.zeros_like(probs))
        probs = probs / probs.sum()
    return probs


def make_case(name: str, directory: str, rope_theta: float | None) -> dict:
    config = json.loads((TINY / directory / "config.json").read_text())
    weights = load_checkpoint(TINY / directory)
    theta = rope_theta if rope_theta is not None else config["language_config"].get("rope_theta", 10000.0)
    torch.manual_seed(0)
    model = language_model(config, weights, theta)
    pairs = []
    for index, p in enumerate(PAIRS):
        attentions = [] if index == 0 else None
        cond = run_row(model, weights, p["cond"], p["image_tokens"], attentions)
        uncond = run_row(model, weights, p["uncond"], p["image_tokens"])
        sampling = [dict(s, probs=sampling_probs(cond[0], uncond[0], s).tolist()) for s in SAMPLING]
        pairs.append({
            "cond_ids": p["cond"], "uncond_ids": p["uncond"], "image_tokens": p["image_tokens"],
            "cond_logits": [l.tolist() for l in cond], "uncond_logits": [l.tolist() for l in uncond],
            "sampling_from_prefill": sampling,
        })
        if attentions is not None:
            # Decode-step attention weights of the cond row: [step][layer][head][key],
            # keys = prompt then decode positions 0..step.
            pairs[-1]["cond_decode_attentions"] = attentions
    return {"name": name, "checkpoint": f"tests/goldens/tiny/{directory}", "rope_theta": theta,
            "pairs": pairs}


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, directory, theta in [("mha", "tiny-mha", None), ("gqa", "tiny-gqa-sharded", None),
                                   ("gqa_theta500k", "tiny-gqa-sharded", 500000.0)]:
        case = make_case(name, directory, theta)
        path = OUT / f"{name}.json"
        path.write_text(json.dumps(case, indent=None, separators=(",", ":")) + "\n")
        print("wrote", path.relative_to(ROOT))


if __name__ == "__main__":
    main()
