"""The small Lumina-format language model: transformers' ChameleonForConditionalGeneration itself
(so the exported checkpoint is the published layout by construction), trained on hidden states
through its lm_head (its forward masks the image-token logits, which we need).
"""

from __future__ import annotations

import torch
import torch.nn as nn
from transformers import ChameleonConfig, ChameleonForConditionalGeneration


def vq_config_for(vq_params: dict) -> dict:
    """HF ChameleonVQVAEConfig fields of our VQGAN (the names HF's converter maps from vqgan.yaml)."""
    dd = vq_params["ddconfig"]
    return {"embed_dim": vq_params["embed_dim"], "num_embeddings": vq_params["n_embed"],
            "double_latent": bool(dd["double_z"]), "latent_channels": dd["z_channels"],
            "resolution": dd["resolution"], "in_channels": dd["in_channels"], "base_channels": dd["ch"],
            "channel_multiplier": list(dd["ch_mult"]), "num_res_blocks": dd["num_res_blocks"],
            "attn_resolutions": list(dd["attn_resolutions"]), "dropout": 0.0, "attn_type": "vanilla"}


def build_config(vocab_size: int, vocabulary_map: dict, vq_params: dict, hidden: int, layers: int, heads: int,
                 intermediate: int, max_positions: int = 1024) -> ChameleonConfig:
    return ChameleonConfig(vocab_size=vocab_size, hidden_size=hidden, intermediate_size=intermediate,
                           num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
                           max_position_embeddings=max_positions, rms_norm_eps=1e-5,
                           rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                           swin_norm=False, model_parallel_size=1, tie_word_embeddings=False,
                           bos_token_id=1, eos_token_id=2, vq_config=vq_config_for(vq_params),
                           vocabulary_map=vocabulary_map, attn_implementation="sdpa")


def build_model(config: ChameleonConfig) -> ChameleonForConditionalGeneration:
    model = ChameleonForConditionalGeneration(config)
    model.model.vqmodel.requires_grad_(False)  # image understanding only; filled from our VQGAN at export
    return model


def hidden_logits(model: ChameleonForConditionalGeneration, ids: torch.Tensor) -> torch.Tensor:
    """[B, L] ids -> [B, L, vocab] raw logits (no image-token masking)."""
    hidden = model.model(input_ids=ids, use_cache=False).last_hidden_state
    return model.lm_head(hidden)


def response_loss(model, ids: torch.Tensor, loss_mask: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy where loss_mask[b, t] marks target position t (t >= 1)."""
    hidden = model.model(input_ids=ids[:, :-1], use_cache=False).last_hidden_state
    sel = loss_mask[:, 1:]
    logits = model.lm_head(hidden[sel])
    return nn.functional.cross_entropy(logits.float(), ids[:, 1:][sel])
