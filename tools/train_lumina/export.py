"""Writes / reads the small Lumina-format model in the published layouts (docs/lumina-mgpt.md):

  <dir>/config.json                     ChameleonForConditionalGeneration config as Lumina-mGPT's config.json
                                        spells it (+ argen_image_sizes: the sizes it was trained for)
  <dir>/generation_config.json
  <dir>/model-0000k-of-0000n.safetensors bf16, HF tensor names, shards <= 16 MB, + model.safetensors.index.json
  <dir>/tokenizer.json, tokenizer_config.json
  <dir>/tokenizer/vqgan.yaml            the VQGAN config in taming's layout
  <dir>/tokenizer/vqgan.ckpt            the VQGAN as a Lightning-style torch.save dict (state_dict, float32)
model.vqmodel.* holds the VQGAN's encoder side (as HF's converter copies it from vqgan.ckpt).
"""

from __future__ import annotations

import json
import os

import torch
from safetensors.torch import save_file

from tools.lumina_torch.vqgan import VQModel, load as load_vqgan, save_lightning_ckpt, write_yaml

SHARD_BYTES = 16 * 1000 * 1000


def published_config(model, image_sizes) -> dict:
    c = model.config
    vq = c.vq_config.to_dict() if hasattr(c.vq_config, "to_dict") else dict(c.vq_config)
    vq = {k: v for k, v in vq.items() if k in ("embed_dim", "num_embeddings", "double_latent", "latent_channels",
                                               "resolution", "in_channels", "base_channels", "channel_multiplier",
                                               "num_res_blocks", "attn_resolutions", "dropout", "attn_type",
                                               "initializer_range")}
    vq["model_type"] = "chameleon_vqgan"
    return {
        "architectures": ["ChameleonForConditionalGeneration"], "model_type": "chameleon",
        "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 1, "eos_token_id": 2, "dropout": 0.0,
        "hidden_act": "silu", "hidden_size": c.hidden_size, "initializer_range": 0.02,
        "intermediate_size": c.intermediate_size, "mask_image_logits": False,
        "max_position_embeddings": c.max_position_embeddings, "mlp_bias": False, "model_parallel_size": 1,
        "num_attention_heads": c.num_attention_heads, "num_hidden_layers": c.num_hidden_layers,
        "num_key_value_heads": c.num_key_value_heads, "rms_norm_eps": c.rms_norm_eps, "rope_scaling": None,
        "rope_theta": 10000.0, "swin_norm": bool(c.swin_norm), "tie_word_embeddings": False,
        "torch_dtype": "bfloat16", "use_cache": True, "vocab_size": c.vocab_size,
        "vocabulary_map": dict(c.vocabulary_map), "vq_config": vq,
        "argen_image_sizes": [list(s) for s in image_sizes],
    }


def export(out_dir: str, model, vq: VQModel, vq_params: dict, tokenizer_dir: str, image_sizes) -> dict:
    os.makedirs(os.path.join(out_dir, "tokenizer"), exist_ok=True)
    # The encoder side of our VQGAN goes into model.vqmodel (image understanding; generation never reads it).
    vq_state = vq.state_dict()
    with torch.no_grad():
        for k, t in model.model.vqmodel.state_dict().items():
            t.copy_(vq_state[k])
        for p in model.parameters():  # what the files hold; the evaluation then uses exactly these weights
            p.copy_(p.to(torch.bfloat16).float())
    tensors = {k: v.detach().to("cpu", torch.bfloat16).contiguous() for k, v in model.state_dict().items()}
    shards, current, size = [], {}, 0
    for name in sorted(tensors):
        nbytes = tensors[name].numel() * 2
        if current and size + nbytes > SHARD_BYTES - 64 * 1024:
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
        json.dump(published_config(model, image_sizes), f, indent=2)
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump({"_from_model_config": True, "bos_token_id": 1, "eos_token_id": 2}, f, indent=2)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        with open(os.path.join(tokenizer_dir, name), "rb") as src, open(os.path.join(out_dir, name), "wb") as dst:
            dst.write(src.read())
    write_yaml(os.path.join(out_dir, "tokenizer", "vqgan.yaml"), vq_params)
    save_lightning_ckpt(os.path.join(out_dir, "tokenizer", "vqgan.ckpt"), vq)
    sizes = {f: os.path.getsize(os.path.join(out_dir, f)) for f in files}
    for f, s in sizes.items():
        if s > 16 * 1024 * 1024:
            raise RuntimeError(f"export: shard {f} exceeds 16 MiB")
    all_bytes = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(out_dir) for f in fs)
    return {"files": files, "tensor_bytes": total, "dir_bytes": all_bytes}


def load(model_dir: str, device: str = "cpu"):
    """-> (HF ChameleonForConditionalGeneration float32, VQModel, config dict): the published loaders' view."""
    from transformers import ChameleonForConditionalGeneration
    model = ChameleonForConditionalGeneration.from_pretrained(model_dir, dtype=torch.float32).to(device).eval()
    vq = load_vqgan(os.path.join(model_dir, "tokenizer", "vqgan.yaml"),
                    os.path.join(model_dir, "tokenizer", "vqgan.ckpt"), device)
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    return model, vq, cfg
