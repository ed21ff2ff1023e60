"""Writes / reads a checkpoint directory in the official Janus-Pro layout (docs/checkpoint-format.md):
config.json (model_type multi_modality, VQ extension keys under gen_vision_config.params),
bf16 safetensors shards of at most 16 MB with model.safetensors.index.json, tokenizer.json.
"""

from __future__ import annotations

import json
import os

import torch
from safetensors.torch import load_file, save_file

from tools.janus_torch.vq16 import VQModel
from tools.train.ar_model import JanusGen

SHARD_BYTES = 16 * 1000 * 1000  # 16 MB (decimal, so under 16 MiB too)
DROP = ("gen_vision_model.quantize.codebook_used",)  # a training statistic, not a weight


def build_config(model: JanusGen, vq_cfg: dict) -> dict:
    c = model.config
    return {
        "model_type": "multi_modality",
        "architectures": ["MultiModalityCausalLM"],
        "torch_dtype": "bfloat16",
        "language_config": {
            "model_type": "llama", "hidden_size": c.hidden_size, "intermediate_size": c.intermediate_size,
            "num_hidden_layers": c.num_hidden_layers, "num_attention_heads": c.num_attention_heads,
            "num_key_value_heads": c.num_key_value_heads, "vocab_size": c.vocab_size,
            "rms_norm_eps": c.rms_norm_eps, "rope_theta": 10000.0,
            "max_position_embeddings": c.max_position_embeddings, "hidden_act": "silu",
            "torch_dtype": "bfloat16",
        },
        "gen_vision_config": {
            "cls": "VQ-16", "model_type": "gen_vision",
            "params": {"image_token_size": vq_cfg["codebook_size"], "n_embed": vq_cfg["codebook_embed_dim"],
                       **vq_cfg},
        },
        "gen_aligner_config": {
            "cls": "MlpProjector", "model_type": "gen_aligner",
            "params": {"depth": 2, "input_dim": vq_cfg["codebook_embed_dim"], "n_embed": c.hidden_size,
                       "projector_type": "mlp_gelu"},
        },
        "gen_head_config": {
            "cls": "vision_head", "model_type": "gen_head",
            "params": {"image_token_embed": c.hidden_size, "image_token_size": vq_cfg["codebook_size"],
                       "n_embed": c.hidden_size},
        },
    }


def export(out_dir: str, model: JanusGen, vq: VQModel, vq_cfg: dict, tokenizer_json: str,
           extra_config: dict | None = None) -> dict:
    """Writes the checkpoint; returns {"files": [...], "bytes": total}. extra_config: top-level
    extension keys for config.json (argen_system_prompt, argen_sampling_defaults)."""
    os.makedirs(out_dir, exist_ok=True)
    tensors = {k: v for k, v in model.state_dict().items()}
    tensors.update({"gen_vision_model." + k: v for k, v in vq.state_dict().items()})
    tensors = {k: v.detach().to("cpu", torch.bfloat16).contiguous() for k, v in tensors.items() if k not in DROP}
    shards, current, size = [], {}, 0
    for name in sorted(tensors):
        nbytes = tensors[name].numel() * 2
        if current and size + nbytes > SHARD_BYTES - 64 * 1024:  # leave room for the header
            shards.append(current)
            current, size = {}, 0
        current[name] = tensors[name]
        size += nbytes
    shards.append(current)
    weight_map, files = {}, []
    for i, shard in enumerate(shards):
        fname = f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, os.path.join(out_dir, fname), metadata={"format": "pt"})
        files.append(fname)
        weight_map.update({k: fname for k in shard})
    total = sum(t.numel() * 2 for t in tensors.values())
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2, sort_keys=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(dict(build_config(model, vq_cfg), **(extra_config or {})), f, indent=2)
    with open(tokenizer_json, encoding="utf-8") as src, \
            open(os.path.join(out_dir, "tokenizer.json"), "w", encoding="utf-8") as dst:
        dst.write(src.read())
    for fname in files:
        if os.path.getsize(os.path.join(out_dir, fname)) > 16 * 1024 * 1024:
            raise RuntimeError(f"export: shard {fname} exceeds 16 MiB")
    return {"files": files, "bytes": total}


VQ_KEYS = ("codebook_size", "codebook_embed_dim", "codebook_l2_norm", "ch", "ch_mult", "z_channels",
           "num_res_blocks")


def _read_state(ckpt_dir: str, keep=lambda name: True) -> tuple[dict, dict]:
    """(config.json, {name: tensor} of the shards' tensors that `keep` accepts)."""
    with open(os.path.join(ckpt_dir, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(ckpt_dir, "model.safetensors.index.json")) as f:
        weight_map = json.load(f)["weight_map"]
    state = {}
    for fname in sorted({f for name, f in weight_map.items() if keep(name)}):
        state.update({k: v for k, v in load_file(os.path.join(ckpt_dir, fname)).items() if keep(k)})
    return cfg, state


def _vq_from_state(ckpt_dir: str, cfg: dict, state: dict) -> VQModel:
    vp = cfg["gen_vision_config"]["params"]
    vq = VQModel(**{k: vp[k] for k in VQ_KEYS})
    vq_state = {k[len("gen_vision_model."):]: v.float() for k, v in state.items()
                if k.startswith("gen_vision_model.")}
    missing, unexpected = vq.load_state_dict(vq_state, strict=False)
    if unexpected or [m for m in missing if m != "quantize.codebook_used"]:
        raise RuntimeError(f"load {ckpt_dir}: VQ tensors missing {missing} unexpected {unexpected}")
    return vq


def load_vq(ckpt_dir: str, device: str = "cpu"):
    """Only the VQ of a checkpoint (a whole one, or a `tools.train.vq_only` extract) ->
    (VQModel float32, config dict)."""
    cfg, state = _read_state(ckpt_dir, lambda name: name.startswith("gen_vision_model."))
    return _vq_from_state(ckpt_dir, cfg, state).to(device).eval(), cfg


def write_vq_only(src_dir: str, dst_dir: str) -> int:
    """Copies a checkpoint's VQ tensors (bf16 as stored) and config.json to dst_dir, with an index
    naming only them, so `load_vq` reads it like the whole checkpoint. Returns the bytes written."""
    cfg, state = _read_state(src_dir, lambda name: name.startswith("gen_vision_model."))
    if not state:
        raise RuntimeError(f"{src_dir}: no gen_vision_model.* tensors")
    os.makedirs(dst_dir, exist_ok=True)
    fname = "vq.safetensors"
    save_file(state, os.path.join(dst_dir, fname), metadata={"format": "pt"})
    total = sum(t.numel() * t.element_size() for t in state.values())
    with open(os.path.join(dst_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": {k: fname for k in state}}, f, indent=2,
                  sort_keys=True)
    with open(os.path.join(dst_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    return os.path.getsize(os.path.join(dst_dir, fname))


def load(ckpt_dir: str, device: str = "cpu"):
    """Reads an exported directory back -> (JanusGen, VQModel, config dict), float32, strict names."""
    cfg, state = _read_state(ckpt_dir)
    lc, vp = cfg["language_config"], cfg["gen_vision_config"]["params"]
    model = JanusGen(text_vocab=lc["vocab_size"], codebook_size=vp["image_token_size"], code_dim=vp["n_embed"],
                     hidden=lc["hidden_size"], layers=lc["num_hidden_layers"], heads=lc["num_attention_heads"],
                     intermediate=lc["intermediate_size"], rope_theta=lc["rope_theta"],
                     max_positions=lc["max_position_embeddings"])
    gen = {k: v.float() for k, v in state.items() if not k.startswith("gen_vision_model.")}
    model.load_state_dict(gen, strict=True)
    vq = _vq_from_state(ckpt_dir, cfg, state)
    return model.to(device).eval(), vq.to(device).eval(), cfg
