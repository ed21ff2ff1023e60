"""The generation half of Janus-Pro's MultiModalityCausalLM, small: a Llama decoder
(transformers LlamaModel) with gen_embed, gen_aligner and gen_head, official module names.

Sequence layout: prompt tokens (BOS ... <begin_of_image>) through embed_tokens, then image tokens
through gen_aligner(gen_embed(.)); the hidden state at position t predicts image token t+1 via gen_head.
"""

from __future__ import annotations

import torch
import torch.nn as nn
from transformers import LlamaConfig, LlamaModel
from transformers.cache_utils import DynamicCache


class MlpProjector(nn.Module):
    """mlp_gelu projector of depth 2: layers.0 Linear(in, H), layers.1 GELU, layers.2 Linear(H, H)."""

    def __init__(self, input_dim: int, n_embed: int):
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(input_dim, n_embed), nn.GELU(), nn.Linear(n_embed, n_embed))

    def forward(self, x):
        return self.layers(x)


class VisionHead(nn.Module):
    def __init__(self, n_embed: int, image_token_embed: int, image_token_size: int):
        super().__init__()
        self.output_mlp_projector = nn.Linear(n_embed, image_token_embed)
        self.vision_activation = nn.GELU()
        self.vision_head = nn.Linear(image_token_embed, image_token_size)

    def forward(self, x):
        return self.vision_head(self.vision_activation(self.output_mlp_projector(x)))


class JanusGen(nn.Module):
    def __init__(self, text_vocab: int, codebook_size: int = 1024, code_dim: int = 8, hidden: int = 384,
                 layers: int = 8, heads: int = 6, intermediate: int = 1024, rope_theta: float = 10000.0,
                 max_positions: int = 1024):
        super().__init__()
        self.config = LlamaConfig(vocab_size=text_vocab, hidden_size=hidden, intermediate_size=intermediate,
                                  num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
                                  rms_norm_eps=1e-6, rope_theta=rope_theta, max_position_embeddings=max_positions,
                                  hidden_act="silu", attention_bias=False, mlp_bias=False,
                                  tie_word_embeddings=False, attn_implementation="sdpa")
        self.language_model = nn.Module()
        self.language_model.model = LlamaModel(self.config)
        self.gen_embed = nn.Embedding(codebook_size, code_dim)
        self.gen_aligner = MlpProjector(code_dim, hidden)
        self.gen_head = VisionHead(hidden, hidden, codebook_size)
        self.text_vocab = text_vocab
        self.codebook_size = codebook_size

    @property
    def llm(self) -> LlamaModel:
        return self.language_model.model

    def embed(self, combined: torch.Tensor) -> torch.Tensor:
        """Ids where values >= text_vocab are image tokens (offset by text_vocab) -> input embeddings."""
        is_image = combined >= self.text_vocab
        text = self.llm.embed_tokens(torch.where(is_image, 0, combined))
        image = self.gen_aligner(self.gen_embed(torch.where(is_image, combined - self.text_vocab, 0)))
        return torch.where(is_image[..., None], image.to(text.dtype), text)

    def loss(self, combined: torch.Tensor) -> torch.Tensor:
        """Next-token cross-entropy on image-token targets only. combined: [B, L] (right-padded)."""
        inputs, targets = combined[:, :-1], combined[:, 1:]
        hidden = self.llm(inputs_embeds=self.embed(inputs), use_cache=False).last_hidden_state
        sel = targets >= self.text_vocab
        logits = self.gen_head(hidden[sel])
        return nn.functional.cross_entropy(logits.float(), targets[sel] - self.text_vocab)

    @torch.no_grad()
    def generate(self, prompt_ids: torch.Tensor, uncond_ids: torch.Tensor, n_tokens: int, cfg_weight: float = 5.0,
                 temperature: float = 1.0, top_k: int = 0,
                 generator: torch.Generator | None = None) -> torch.Tensor:
        """Official Janus sampling: rows [cond; uncond], logits = u + cfg * (c - u), softmax(logits / T),
        multinomial (top_k > 0 keeps logits >= the k-th largest, as engine/model/sampler.h). prompt_ids / uncond_ids: [B, P] (same length P). Returns image tokens [B, n_tokens]."""
        b = prompt_ids.shape[0]
        ids = torch.cat([prompt_ids, uncond_ids], dim=0)
        cache = DynamicCache()
        out = self.llm(inputs_embeds=self.llm.embed_tokens(ids), past_key_values=cache, use_cache=True)
        hidden = out.last_hidden_state[:, -1]
        tokens = torch.empty(b, n_tokens, dtype=torch.long, device=ids.device)
        for i in range(n_tokens):
            logits = self.gen_head(hidden).float()
            cond, uncond = logits[:b], logits[b:]
            mixed = uncond + cfg_weight * (cond - uncond)
            if top_k > 0:
                kth = torch.topk(mixed, top_k, dim=-1).values[:, -1:]
                mixed = mixed.masked_fill(mixed < kth, float("-inf"))
            probs = torch.softmax(mixed / temperature, dim=-1)
            nxt = torch.multinomial(probs, 1, generator=generator).squeeze(1)
            tokens[:, i] = nxt
            emb = self.gen_aligner(self.gen_embed(torch.cat([nxt, nxt])))[:, None, :]
            out = self.llm(inputs_embeds=emb.to(hidden.dtype), past_key_values=cache, use_cache=True)
            hidden = out.last_hidden_state[:, -1]
        return tokens
