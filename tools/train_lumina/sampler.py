"""Lumina-mGPT image generation for the small model, as Lumina-mGPT's inference_solver runs it, batched:
a conditional row (<s> prompt <reserved08706> <racm3:break> H W ...) and an unconditional row that starts
at <racm3:break> (its own KV cache, positions from 0); the three header tokens forced (Lumina-mGPT's model
samples them; the request fixes the size here); per image row w codes sampled, then <reserved08799> forced
into both rows; <eoss> after the last row. Each sampled step: logits = u + cfg * (c - u) over the image
tokens only, top-k (k > 0), / temperature, softmax, multinomial.

The forward pass is our own restatement of transformers' Chameleon (RMSNorm in f32, per-head LayerNorm on
q and k before rotate-half RoPE, causal SDPA, SiLU MLP, pre-norm or swin-norm placement) with preallocated
KV caches; `max_abs_diff_vs_hf` checks it against the HF model.
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import torch
import torch.nn.functional as F

from tools.train_lumina.model import hidden_logits


class ChameleonSampler:
    def __init__(self, model, dtype: torch.dtype | None = None):
        c = model.config
        self.model = model
        self.nh, self.nkv = c.num_attention_heads, c.num_key_value_heads
        self.hd = c.hidden_size // c.num_attention_heads
        self.eps = c.rms_norm_eps
        self.swin = bool(c.swin_norm)
        rope = getattr(c, "rope_parameters", None) or {}
        self.theta = rope.get("rope_theta", getattr(c, "rope_theta", 10000.0))
        dev = next(model.parameters()).device
        self.device = dev
        self.dtype = dtype or (torch.bfloat16 if dev.type == "cuda" else torch.float32)
        cast = lambda t: t.detach().to(self.dtype)  # noqa: E731
        self.layers = []
        for layer in model.model.layers:
            a, m = layer.self_attn, layer.mlp
            self.layers.append({
                "ln1": layer.input_layernorm.weight.detach().float(),
                "qkv": cast(torch.cat([a.q_proj.weight, a.k_proj.weight, a.v_proj.weight])),
                "o": cast(a.o_proj.weight),
                "qn": (a.q_norm.weight.detach().float(), a.q_norm.bias.detach().float()),
                "kn": (a.k_norm.weight.detach().float(), a.k_norm.bias.detach().float()),
                "ln2": layer.post_attention_layernorm.weight.detach().float(),
                "gate_up": cast(torch.cat([m.gate_proj.weight, m.up_proj.weight])),
                "down": cast(m.down_proj.weight),
            })
        self.inter = model.model.layers[0].mlp.gate_proj.weight.shape[0]
        self.norm = model.model.norm.weight.detach().float()
        self.embed = model.model.embed_tokens.weight.detach().to(self.dtype)
        self.head = model.lm_head.weight.detach().to(self.dtype)

    def _rms(self, x, w):
        xf = x.float()
        return (w * (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps))).to(self.dtype)

    @staticmethod
    def _head_norm(x, wb):
        w, b = wb
        return (F.layer_norm(x.float(), (x.shape[-1],), None, None, eps=1e-5) * w + b).to(x.dtype)

    def _rope(self, positions):
        inv = 1.0 / (self.theta ** (torch.arange(0, self.hd, 2, device=self.device, dtype=torch.float32) / self.hd))
        freqs = positions.float()[:, None] * inv[None, :]
        emb = torch.cat([freqs, freqs], dim=-1)
        return emb.cos().to(self.dtype), emb.sin().to(self.dtype)

    @staticmethod
    def _rotate(x, cos, sin):
        half = x.shape[-1] // 2
        return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin

    def _attn(self, li, h, pos0, kcache, vcache):
        w = self.layers[li]
        b, t, _ = h.shape
        q, k, v = (h @ w["qkv"].t()).split([self.nh * self.hd, self.nkv * self.hd, self.nkv * self.hd], dim=-1)
        q = self._head_norm(q.view(b, t, self.nh, self.hd), w["qn"]).transpose(1, 2)
        k = self._head_norm(k.view(b, t, self.nkv, self.hd), w["kn"]).transpose(1, 2)
        cos, sin = self._rope(torch.arange(pos0, pos0 + t, device=self.device))
        q, k = self._rotate(q, cos, sin), self._rotate(k, cos, sin)
        end = pos0 + t
        kcache[li, :, :, pos0:end] = k
        vcache[li, :, :, pos0:end] = v.view(b, t, self.nkv, self.hd).transpose(1, 2)
        keys, vals = kcache[li, :, :, :end], vcache[li, :, :, :end]
        if self.nkv != self.nh:
            keys = keys.repeat_interleave(self.nh // self.nkv, dim=1)
            vals = vals.repeat_interleave(self.nh // self.nkv, dim=1)
        att = F.scaled_dot_product_attention(q, keys, vals, is_causal=(t > 1 and pos0 == 0))
        return att.transpose(1, 2).reshape(b, t, self.nh * self.hd) @ w["o"].t()

    def _mlp(self, li, h):
        w = self.layers[li]
        gate, up = (h @ w["gate_up"].t()).split([self.inter, self.inter], dim=-1)
        return (F.silu(gate) * up) @ w["down"].t()

    def forward(self, ids, pos0: int, kcache, vcache):
        """ids [B, T] at positions pos0.. -> final-normed hidden [B, T, H]; fills the caches."""
        x = self.embed[ids]
        for li, w in enumerate(self.layers):
            if self.swin:
                x = x + self._rms(self._attn(li, x, pos0, kcache, vcache), w["ln1"])
                x = x + self._rms(self._mlp(li, x), w["ln2"])
            else:
                x = x + self._attn(li, self._rms(x, w["ln1"]), pos0, kcache, vcache)
                x = x + self._mlp(li, self._rms(x, w["ln2"]))
        return self._rms(x, self.norm)

    def cache(self, rows: int, length: int):
        shape = (len(self.layers), rows, self.nkv, length, self.hd)
        return (torch.empty(shape, device=self.device, dtype=self.dtype),
                torch.empty(shape, device=self.device, dtype=self.dtype))

    @torch.no_grad()
    def generate(self, cond_ids: torch.Tensor, header: list[int], grid_h: int, grid_w: int, image_offset: int,
                 n_codes: int, new_line: int, cfg: float = 4.0, temperature: float = 1.0, top_k: int = 0,
                 generator: torch.Generator | None = None) -> torch.Tensor:
        """cond_ids [B, P] (one length) -> codes [B, grid_h, grid_w]."""
        b, p = cond_ids.shape
        hdr = torch.tensor(header, device=self.device)[None].expand(b, -1)
        body = grid_h * (grid_w + 1)
        kc, vc = self.cache(b, p + 3 + body)
        ku, vu = self.cache(b, 3 + body)
        hc = self.forward(torch.cat([cond_ids, hdr], 1), 0, kc, vc)[:, -1]
        hu = self.forward(hdr, 0, ku, vu)[:, -1]
        pc, pu = p + 3, 3
        head = self.head[image_offset:image_offset + n_codes]
        codes = torch.empty(b, grid_h, grid_w, dtype=torch.long, device=self.device)
        nl = torch.full((b, 1), new_line, device=self.device, dtype=torch.long)
        for y in range(grid_h):
            for x in range(grid_w):
                lc, lu = (hc @ head.t()).float(), (hu @ head.t()).float()
                mixed = lu + cfg * (lc - lu)
                if 0 < top_k < n_codes:
                    kth = torch.topk(mixed, top_k, dim=-1).values[:, -1:]
                    mixed = mixed.masked_fill(mixed < kth, float("-inf"))
                probs = torch.softmax(mixed / temperature, dim=-1)
                code = torch.multinomial(probs, 1, generator=generator)
                codes[:, y, x] = code[:, 0]
                tok = code + image_offset
                hc = self.forward(tok, pc, kc, vc)[:, -1]
                hu = self.forward(tok, pu, ku, vu)[:, -1]
                pc, pu = pc + 1, pu + 1
            if y + 1 < grid_h:  # the last row's new line only precedes <eoss>, which needs no forward
                hc = self.forward(nl, pc, kc, vc)[:, -1]
                hu = self.forward(nl, pu, ku, vu)[:, -1]
                pc, pu = pc + 1, pu + 1
        return codes


@torch.no_grad()
def max_abs_diff_vs_hf(model, ids: torch.Tensor, split: int) -> float:
    """Our forward (prefill ids[:, :split], then one token at a time) against HF's logits of the whole sequence."""
    s = ChameleonSampler(model, dtype=torch.float32)
    ref = hidden_logits(model, ids).float()
    k, v = s.cache(ids.shape[0], ids.shape[1])
    outs = [s.forward(ids[:, :split], 0, k, v)]
    for t in range(split, ids.shape[1]):
        outs.append(s.forward(ids[:, t:t + 1], t, k, v))
    ours = (torch.cat(outs, 1) @ s.head.float().t()).float()
    return float((ours - ref).abs().max() / max(1.0, float(ref.abs().max())))


@torch.no_grad()
def sample_prompts(model, vq, enc, prompts: list[str], per_prompt: int, image_size: int, grid: int, cfg: float,
                   temperature: float, top_k: int, seed: int = 0, max_rows: int = 512) -> np.ndarray:
    """-> uint8 images [len(prompts) * per_prompt, S, S, 3], prompt-major. Equal-length prompts share a batch."""
    from tools.train_lumina.vq_train import decode_codes
    device = next(model.parameters()).device
    if device.type == "cuda":
        torch.backends.cuda.enable_cudnn_sdp(False)  # cuDNN SDPA builds a graph per KV length
    gen = torch.Generator(device=device).manual_seed(seed)
    sampler = ChameleonSampler(model)
    ids = [enc.encode(p, image_size, image_size) for p in prompts]
    header = enc.header(image_size, image_size)
    n_codes = vq.quantize.n_e
    by_len = defaultdict(list)
    for i, p in enumerate(ids):
        for k in range(per_prompt):
            by_len[len(p)].append((i, k))
    out = [None] * (len(prompts) * per_prompt)
    for _, rows in sorted(by_len.items()):
        for start in range(0, len(rows), max_rows):
            chunk = rows[start:start + max_rows]
            cond = torch.tensor([ids[i] for i, _ in chunk], device=device)
            codes = sampler.generate(cond, header, grid, grid, enc.image_offset, n_codes, enc.new_line, cfg=cfg,
                                     temperature=temperature, top_k=top_k, generator=gen)
            images = decode_codes(vq, codes).cpu().numpy()
            for (i, k), img in zip(chunk, images):
                out[i * per_prompt + k] = img
    return np.stack(out)
