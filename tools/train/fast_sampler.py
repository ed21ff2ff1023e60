"""A lean CFG sampler for JanusGen with a preallocated KV cache (no per-step allocation of the
cache, no HF mask building): the same math as transformers' LlamaModel (RMSNorm in f32, rotate-half
RoPE, causal SDPA, SiLU MLP), checked against it by tools/train/check_fast_sampler.py.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tools.train.ar_model import JanusGen


class FastSampler:
    def __init__(self, model: JanusGen, dtype: torch.dtype | None = None):
        self.model = model
        c = model.config
        self.nh, self.nkv = c.num_attention_heads, c.num_key_value_heads
        self.hd = c.hidden_size // c.num_attention_heads
        self.eps = c.rms_norm_eps
        self.theta = c.rope_theta if hasattr(c, "rope_theta") else c.rope_parameters["rope_theta"]
        dev = next(model.parameters()).device
        self.dtype = dtype or (torch.bfloat16 if dev.type == "cuda" else torch.float32)
        self.device = dev
        llm = model.llm
        cast = lambda t: t.detach().to(self.dtype)  # noqa: E731
        self.layers = []
        for layer in llm.layers:
            a, m = layer.self_attn, layer.mlp
            self.layers.append({
                "ln1": layer.input_layernorm.weight.detach().float(),
                "qkv": cast(torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight])),
                "o": cast(a.o_proj.weight),
                "ln2": layer.post_attention_layernorm.weight.detach().float(),
                "gate_up": cast(torch.cat([m.gate_proj.weight, m.up_proj.weight])),
                "down": cast(m.down_proj.weight),
            })
        self.norm = llm.norm.weight.detach().float()
        self.inter = llm.layers[0].mlp.gate_proj.weight.shape[0]

    def _rms(self, x, w):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (w * xf).to(self.dtype)

    def _rope(self, positions):
        inv = 1.0 / (self.theta ** (torch.arange(0, self.hd, 2, device=self.device, dtype=torch.float32) / self.hd))
        freqs = positions.float()[:, None] * inv[None, :]
        emb = torch.cat([freqs, freqs], dim=-1)
        return emb.cos().to(self.dtype), emb.sin().to(self.dtype)

    @staticmethod
    def _rotate(x, cos, sin):
        half = x.shape[-1] // 2
        rot = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rot * sin

    def _forward(self, x, pos0: int, kcache, vcache):
        """x [B, T, H] at positions pos0..pos0+T-1 -> final-normed hidden [B, T, H]; fills the caches."""
        b, t, _ = x.shape
        cos, sin = self._rope(torch.arange(pos0, pos0 + t, device=self.device))
        end = pos0 + t
        for li, w in enumerate(self.layers):
            h = self._rms(x, w["ln1"])
            qkv = h @ w["qkv"].t()
            q, k, v = qkv.split([self.nh * self.hd, self.nkv * self.hd, self.nkv * self.hd], dim=-1)
            q = self._rotate(q.view(b, t, self.nh, self.hd).transpose(1, 2), cos, sin)
            k = self._rotate(k.view(b, t, self.nkv, self.hd).transpose(1, 2), cos, sin)
            kcache[li, :, :, pos0:end] = k
            vcache[li, :, :, pos0:end] = v.view(b, t, self.nkv, self.hd).transpose(1, 2)
            keys, vals = kcache[li, :, :, :end], vcache[li, :, :, :end]
            if self.nkv != self.nh:
                keys = keys.repeat_interleave(self.nh // self.nkv, dim=1)
                vals = vals.repeat_interleave(self.nh // self.nkv, dim=1)
            att = F.scaled_dot_product_attention(q, keys, vals, is_causal=(t > 1 and pos0 == 0))
            x = x + att.transpose(1, 2).reshape(b, t, self.nh * self.hd) @ w["o"].t()
            h = self._rms(x, w["ln2"])
            gate, up = (h @ w["gate_up"].t()).split([self.inter, self.inter], dim=-1)
            x = x + (F.silu(gate) * up) @ w["down"].t()
        return self._rms(x, self.norm)

    @torch.no_grad()
    def generate(self, prompt_ids, uncond_ids, n_tokens: int, cfg_weight: float = 5.0, temperature: float = 1.0,
                 top_k: int = 0, generator: torch.Generator | None = None) -> torch.Tensor:
        """Same contract and sampling as JanusGen.generate."""
        m = self.model
        b, p = prompt_ids.shape
        ids = torch.cat([prompt_ids, uncond_ids], dim=0)
        shape = (len(self.layers), 2 * b, self.nkv, p + n_tokens, self.hd)
        kcache = torch.empty(shape, device=self.device, dtype=self.dtype)
        vcache = torch.empty(shape, device=self.device, dtype=self.dtype)
        hidden = self._forward(m.llm.embed_tokens(ids).to(self.dtype), 0, kcache, vcache)[:, -1]
        tokens = torch.empty(b, n_tokens, dtype=torch.long, device=self.device)
        head = m.gen_head
        for i in range(n_tokens):
            logits = head(hidden.to(head.vision_head.weight.dtype)).float()
            cond, uncond = logits[:b], logits[b:]
            mixed = uncond + cfg_weight * (cond - uncond)
            if top_k > 0:
                kth = torch.topk(mixed, top_k, dim=-1).values[:, -1:]
                mixed = mixed.masked_fill(mixed < kth, float("-inf"))
            probs = torch.softmax(mixed / temperature, dim=-1)
            nxt = torch.multinomial(probs, 1, generator=generator).squeeze(1)
            tokens[:, i] = nxt
            if i + 1 == n_tokens:
                break
            emb = m.gen_aligner(m.gen_embed(torch.cat([nxt, nxt])))[:, None, :]
            hidden = self._forward(emb.to(self.dtype), p + i, kcache, vcache)[:, -1]
        return tokens
