#!/usr/bin/env python3
"""The careful PyTorch loop of issue #31: NextStep-1-14B's generation, the peer of argen_bench --model nextstep-14b.

A random-weight loop of the official generation (stepfun-ai/NextStep-1,
nextstep/models: pipeline_nextstep.py's decoding, modeling_fm_head.py's
FlowMatchingHead.sample over SimpleMLPAdaLN) at the published shape: a
Qwen2.5-14B-style decoder (hidden 5120, 48 layers, 40 query / 8 KV heads of
128, FFN 13824, q/k/v projections with bias, o without, RMSNorm, RoPE theta
1e6), image_in_projector (64 -> 5120) and image_out_projector (5120 -> 5120),
and the flow-matching head (12 AdaLN residual blocks of width 1536, timestep
and condition embeddings, final layer to the 64-dim token) integrated over 50
sampler steps (49 Euler-Maruyama steps over linspace(0, 0.96, 50) shifted by
timesteps_shift 1, then one Euler step of 0.04) with CFG 7.5 on the velocity;
each token is LayerNormed (use_norm, no affine) and fed back through
image_in_projector. 32 x 32 = 1,024 tokens an image (512 px).

Written the way a careful PyTorch user would: bf16 weights built directly on
the GPU (28 GB need no host copy), q|k|v (with their biases) and gate|up fused
into one weight each, a static KV cache [rows, 8, prompt + 1024 (padded to
16), 128] per layer, grouped-query decode attention as in
torch_janus_loop.py (the 5 query heads of a KV head as its queries, no K/V
copy), and two CUDA graphs replayed per token: the decoder step (one per KV
bucket: the token's image_in_projector, the 48 layers, the hidden state into a
static buffer) and the head (final norm, image_out_projector, the 50-step
sampler with its noise drawn on the GPU, the token's LayerNorm). Like argen's
device head (engine/cuda/device_flow_head.h), the head makes cond_embed(c)
once per token (it is constant over the sampler's steps), the 50 time
embeddings once (the grid is fixed), every adaLN modulation of an evaluation
(12 blocks and the final layer) in one GEMM with modulate's 1 + scale folded
into the bias, all 50 steps' noise in one draw, and the Euler-Maruyama update
in closed form: with alpha = t, sigma = 1 - t the official score's variance
is sigma, so drift = (1 + t) v - x and x <- x (1 - dt) + (1 + t) dt v +
sqrt(2 sigma dt) w, v = v_uncond + cfg (v_cond - v_uncond). Rows are the
official layout: the images' cond rows, then their uncond rows (2N rows for N
images); both branches feed the same token. The net runs in bf16 on a bf16
time (the official .to(c)), the sampler's x in fp32, the token in bf16.
lm_head is not built (image generation never reads it), and the official
loop's last decoder forward (it feeds the 1,024th token, whose output nothing
reads) is not run: 1,023 decode steps after the prefill, as argen_bench's.

Timing is argen_bench's: wall time with the device synchronised, the prompts'
prefill (which samples token 0) included, img/s = images / (prefill_s +
decode_s); graphs are captured (and warmed) before the clock starts and the
capture time is printed apart. CUDA events around each graph in the timed
loop split the step into decoder and head. --tokens T < 1024 times T - 1 of
the 1,023 decode steps at positions spread evenly over the image (every
1023 / (T - 1)-th, so that their KV lengths span the whole image's) and
extrapolates decode_s = 1023 x the mean step: such lines say "extrapolated".
Output lines:

  model policy images prefill_s decode_s step_ms head_ms img/s | head% capture_s peak_GB timed_steps measured|extrapolated
  split model torch-loop images=N: step .. ms = decoder .. ms + head .. ms (..% of the step; ...); one batch .. s (...)

Usage (the device's python3 has torch; nothing to install):
  python3 bench/gpu/torch_nextstep_loop.py --batches 1,16,64
  python3 bench/gpu/torch_nextstep_loop.py --batches 64 --tokens 128    # quick: 127 steps, extrapolated
  python3 bench/gpu/torch_nextstep_loop.py --device cpu --tiny --check  # ctest (seconds)

--tiny runs the same loop at a tiny shape (CPU, seconds); --check (tiny only)
runs it teacher-forced in float64 and compares every condition handed to the
head with a cache-free causal forward, and every sampled token with the
official sampler written out plainly (the net from scratch at each call:
its own time embedding, cond_embed, one adaLN GEMM a block, the score and
drift as the official formulas) on the same noise.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from dataclasses import dataclass

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # the ctest skips (77) where torch is not installed
    print("torch is not installed", file=sys.stderr)
    sys.exit(77)

LAYER_NORM_EPS = 1e-6  # the head's LayerNorms and use_norm's


@dataclass(frozen=True)
class NextStepShape:
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    inter: int
    vocab: int
    rope_theta: float
    rms_eps: float
    token_dim: int  # latent_channels * latent_patch_size^2
    head_width: int  # fm_head_dim
    head_blocks: int  # fm_head_layers
    head_freqs: int  # TimestepEmbedder's frequency_embedding_size
    side: int  # latent_size: tokens a side
    prompt_len: int  # tokens a prompt row (argen_bench --prompt-len in the scenario)
    sampler_steps: int = 50  # example.py's num_sampling_steps
    last_step_size: float = 0.04
    timesteps_shift: float = 1.0  # example.py's text-to-image call
    cfg: float = 7.5  # example.py's, on the velocity

    @property
    def image_tokens(self) -> int:
        return self.side * self.side


# stepfun-ai/NextStep-1-Large (as bench/gpu/nextstep_shapes.cc records it): Qwen2.5-14B's decoder, the image
# fields configuration_nextstep.py's defaults (latent 32 x 32 of 16 channels, patch 2, head 1536 x 12).
PUBLISHED = NextStepShape("nextstep-14b", layers=48, hidden=5120, heads=40, kv_heads=8, head_dim=128, inter=13824,
                          vocab=152064, rope_theta=1e6, rms_eps=1e-5, token_dim=64, head_width=1536, head_blocks=12,
                          head_freqs=256, side=32, prompt_len=50)
# The same structure at a size the CPU runs in well under a second; query groups of 5 as published.
TINY = NextStepShape("nextstep-tiny", layers=2, hidden=64, heads=10, kv_heads=2, head_dim=8, inter=96, vocab=256,
                     rope_theta=1e6, rms_eps=1e-5, token_dim=8, head_width=32, head_blocks=2, head_freqs=16, side=4,
                     prompt_len=8, sampler_steps=6)


def time_grid(s: NextStepShape) -> torch.Tensor:
    """The sampler's times (fp32, as the official torch.linspace on the CPU): linspace(0, 1 - last_step_size,
    steps), shifted t / (shift - (shift - 1) t)."""
    t = torch.linspace(0.0, 1.0 - s.last_step_size, s.sampler_steps)
    return t / (s.timesteps_shift - (s.timesteps_shift - 1.0) * t)


def timestep_frequencies(t: torch.Tensor, dim: int) -> torch.Tensor:
    """TimestepEmbedder's sinusoids of t [n] (fp32): [cos(t f), sin(t f)], f_i = 10000^(-i / (dim / 2))."""
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=torch.float32) / half).to(t.device)
    args = t.float()[:, None] * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


def rope_tables(s: NextStepShape, max_len: int):
    """fp32 cos, sin [max_len, head_dim], half-split pairs (channel j with j + head_dim / 2), as Qwen2's."""
    inv = 1.0 / (s.rope_theta ** (torch.arange(0, s.head_dim, 2, dtype=torch.float32) / s.head_dim))
    angles = torch.outer(torch.arange(max_len, dtype=torch.float32), inv)
    return torch.cat([angles.cos()] * 2, dim=-1), torch.cat([angles.sin()] * 2, dim=-1)


def rotate(x, cos, sin):  # RoPE, x [..., T, head_dim], cos/sin [T, head_dim]
    a, b = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-b, a], dim=-1) * sin


class NextStepLoop:
    """Random weights of one shape and the decode state of one batch of images."""

    def __init__(self, s: NextStepShape, device: torch.device, dtype: torch.dtype, cfg: float, std: float = 0.02,
                 seed: int = 0):
        self.s, self.device, self.dtype, self.cfg = s, device, dtype, cfg
        g = torch.Generator(device=device).manual_seed(seed)
        H, I, D, W = s.hidden, s.inter, s.token_dim, s.head_width
        self.q_dim, self.kv_dim = s.heads * s.head_dim, s.kv_heads * s.head_dim

        def rand(*size):  # generated where it lives (14B: seconds on the GPU)
            return torch.randn(*size, generator=g, device=device, dtype=dtype).mul_(std)

        def ones(n):
            return torch.ones(n, device=device, dtype=dtype)

        qkv = self.q_dim + 2 * self.kv_dim
        self.embed = rand(s.vocab, H)
        self.layers = [dict(ln1=ones(H), qkv=rand(qkv, H), qkv_b=rand(qkv), o=rand(H, self.q_dim), ln2=ones(H),
                            gate_up=rand(2 * I, H), down=rand(H, I)) for _ in range(s.layers)]
        self.final_norm = ones(H)
        self.in_w, self.in_b = rand(H, D), rand(H)  # image_in_projector
        self.out_w, self.out_b = rand(H, H), rand(H)  # image_out_projector
        # The head (image_head.net): time_embed.mlp.{0,2}, cond_embed, input_proj, res_blocks, final_layer.
        self.time_w1, self.time_b1, self.time_w2, self.time_b2 = rand(W, s.head_freqs), rand(W), rand(W, W), rand(W)
        self.cond_w, self.cond_b = rand(W, H), rand(W)
        self.input_w, self.input_b = rand(W, D), rand(W)
        self.blocks = [dict(ln_w=ones(W), ln_b=rand(W), fc1=rand(W, W), fc1_b=rand(W), fc2=rand(W, W), fc2_b=rand(W))
                       for _ in range(s.head_blocks)]
        # Every adaLN_modulation.1 stacked: rows [3 W b, 3 W (b + 1)) are block b's (shift, scale, gate), the last
        # 2 W the final layer's (shift, scale). mod_b is the checkpoint's bias; mod_b_folded adds modulate's 1 to
        # each scale, so that LayerNorm(x) * (1 + scale) + shift is one addcmul.
        self.mod_w, self.mod_b = rand((3 * s.head_blocks + 2) * W, W), rand((3 * s.head_blocks + 2) * W)
        self.mod_b_folded = self.mod_b.clone()
        for start in [3 * W * b + W for b in range(s.head_blocks)] + [3 * W * s.head_blocks + W]:
            self.mod_b_folded[start:start + W] += 1
        self.final_w, self.final_b = rand(D, W), rand(D)
        self.times = time_grid(s)
        # The grid's time embeddings, made once: the net sees t in its dtype (the official ti.to(c)).
        t_net = self.times.to(dtype).to(device)
        freq = timestep_frequencies(t_net, s.head_freqs).to(dtype)
        self.time_emb = F.linear(F.silu(F.linear(freq, self.time_w1, self.time_b1)), self.time_w2, self.time_b2)

    def params(self) -> dict:
        decoder = sum(w.numel() for layer in self.layers for w in layer.values())
        head = sum(w.numel() for w in [self.time_w1, self.time_b1, self.time_w2, self.time_b2, self.cond_w, self.cond_b,
                                       self.input_w, self.input_b, self.mod_w, self.mod_b, self.final_w, self.final_b])
        head += sum(w.numel() for b in self.blocks for w in b.values())
        return dict(decoder=decoder, head=head, projectors=sum(w.numel() for w in [self.in_w, self.in_b, self.out_w,
                                                                                   self.out_b]),
                    embed=self.embed.numel())

    # --- batch state -------------------------------------------------------
    def allocate(self, images: int, prompt_len: int):
        s, dev, dt = self.s, self.device, self.dtype
        self.images, self.rows, self.prompt_len = images, 2 * images, prompt_len
        # Padded to a multiple of 16 so that SDPA's fused kernels take the masked static cache.
        self.max_len = (prompt_len + s.image_tokens + 15) // 16 * 16
        self.k_cache = [torch.zeros(self.rows, s.kv_heads, self.max_len, s.head_dim, device=dev, dtype=dt)
                        for _ in range(s.layers)]
        self.v_cache = [torch.zeros_like(k) for k in self.k_cache]
        cos, sin = rope_tables(s, self.max_len)
        self.cos, self.sin = cos.to(dev, dt), sin.to(dev, dt)
        self.positions = torch.arange(self.max_len, device=dev)
        # The graphs' static buffers.
        self.pos = torch.zeros(1, dtype=torch.long, device=dev)  # the position the next decoder step writes
        self.mask = torch.zeros(1, 1, 1, self.max_len, dtype=torch.bool, device=dev)
        self.hidden = torch.zeros(self.rows, s.hidden, device=dev, dtype=dt)  # the last hidden state (pre-norm)
        self.token = torch.zeros(images, s.token_dim, device=dev, dtype=dt)  # the token the next step feeds
        # The sampler's state and draws: fp32 (the official noise and x), float64 in --check's float64 run.
        state = torch.promote_types(dt, torch.float32)
        self.x = torch.zeros(images, s.token_dim, device=dev, dtype=state)
        self.xin = torch.zeros(2, images, s.token_dim, device=dev, dtype=dt)  # x for the cond and uncond rows
        self.noise = torch.zeros(s.sampler_steps, images, s.token_dim, device=dev, dtype=state)
        self.generated = torch.zeros(images, s.image_tokens, s.token_dim, device=dev, dtype=dt)

    def free(self):
        for name in ("k_cache", "v_cache", "cos", "sin", "positions", "pos", "mask", "hidden", "token", "x", "xin",
                     "noise", "generated"):
            if hasattr(self, name):
                delattr(self, name)

    # --- the decoder -------------------------------------------------------
    def attention_block(self, x, layer, l, cos, sin, write_at, attend):
        """x [R, T, H]; write_at: the cache positions of these T tokens (device); attend(q, k_cache, v_cache)."""
        R, T, H = x.shape
        s = self.s
        h = F.rms_norm(x, (H,), layer["ln1"], s.rms_eps)
        q, k, v = F.linear(h, layer["qkv"], layer["qkv_b"]).split([self.q_dim, self.kv_dim, self.kv_dim], dim=-1)
        q = rotate(q.view(R, T, s.heads, s.head_dim).transpose(1, 2), cos, sin)
        k = rotate(k.view(R, T, s.kv_heads, s.head_dim).transpose(1, 2), cos, sin)
        v = v.view(R, T, s.kv_heads, s.head_dim).transpose(1, 2)
        self.k_cache[l].index_copy_(2, write_at, k)
        self.v_cache[l].index_copy_(2, write_at, v)
        o = attend(q, self.k_cache[l], self.v_cache[l])
        x = x + F.linear(o.transpose(1, 2).reshape(R, T, self.q_dim), layer["o"])
        h = F.rms_norm(x, (H,), layer["ln2"], s.rms_eps)
        gate, up = F.linear(h, layer["gate_up"]).chunk(2, dim=-1)
        return x + F.linear(F.silu(gate) * up, layer["down"])

    def prefill(self, prompt_ids):
        """prompt_ids [2N, Lp]: fills the cache at [0, Lp), the last hidden state into `hidden`."""
        x = self.embed[prompt_ids]
        Lp = prompt_ids.shape[1]

        def attend(q, kc, vc):
            return F.scaled_dot_product_attention(q, kc[:, :, :Lp], vc[:, :, :Lp], is_causal=True, enable_gqa=True)

        for l, layer in enumerate(self.layers):
            x = self.attention_block(x, layer, l, self.cos[:Lp], self.sin[:Lp], self.positions[:Lp], attend)
        self.hidden.copy_(x[:, -1])
        self.pos.fill_(Lp)

    def decoder_step(self, attend_len: int):
        """`token` through image_in_projector at position `pos` (< attend_len) on both branches' rows; the last
        hidden state into `hidden`, pos + 1. The attention reads the cache's [0, attend_len), masked to <= pos."""
        N, H = self.images, self.s.hidden
        e = F.linear(self.token, self.in_w, self.in_b)
        x = e.unsqueeze(0).expand(2, N, H).reshape(2 * N, 1, H)
        torch.le(self.positions, self.pos, out=self.mask.view(-1))
        mask = self.mask[..., :attend_len]
        cos, sin = self.cos.index_select(0, self.pos), self.sin.index_select(0, self.pos)

        def attend(q, kc, vc):
            # The query heads of one KV head as that head's queries: q [R, Hq, 1, hd] -> [R, Hkv, Hq / Hkv, hd].
            R, Hq, _, hd = q.shape
            Hkv = kc.shape[1]
            o = F.scaled_dot_product_attention(q.reshape(R, Hkv, Hq // Hkv, hd), kc[:, :, :attend_len],
                                               vc[:, :, :attend_len], attn_mask=mask)
            return o.reshape(R, Hq, 1, hd)

        for l, layer in enumerate(self.layers):
            x = self.attention_block(x, layer, l, cos, sin, self.pos, attend)
        self.hidden.copy_(x[:, 0])
        self.pos.add_(1)

    # --- the head ----------------------------------------------------------
    def velocity(self, xin, k: int, c_emb):
        """SimpleMLPAdaLN at the grid's time k: xin [rows, D], c_emb = cond_embed(c) [rows, W] -> v [rows, D]."""
        W, B = self.s.head_width, self.s.head_blocks
        mods = F.linear(F.silu(c_emb + self.time_emb[k]), self.mod_w, self.mod_b_folded)
        h = F.linear(xin, self.input_w, self.input_b)
        for b, blk in enumerate(self.blocks):
            shift, scale1, gate = (mods[:, (3 * b + j) * W:(3 * b + j + 1) * W] for j in range(3))
            hn = torch.addcmul(shift, F.layer_norm(h, (W,), blk["ln_w"], blk["ln_b"], LAYER_NORM_EPS), scale1)
            a = F.silu(F.linear(hn, blk["fc1"], blk["fc1_b"]), inplace=True)
            h = h.addcmul_(gate, F.linear(a, blk["fc2"], blk["fc2_b"]))
        shift, scale1 = mods[:, 3 * B * W:(3 * B + 1) * W], mods[:, (3 * B + 1) * W:]
        hn = torch.addcmul(shift, F.layer_norm(h, (W,), eps=LAYER_NORM_EPS), scale1)
        return F.linear(hn, self.final_w, self.final_b)

    def head(self, draw: bool = True):
        """One token per image from `hidden` (the sampler's noise drawn into `noise` unless draw is False): into
        `token` and generated[:, pos - prompt_len]."""
        s, N, D, cfg = self.s, self.images, self.s.token_dim, self.cfg
        c = F.linear(F.rms_norm(self.hidden, (s.hidden,), self.final_norm, s.rms_eps), self.out_w, self.out_b)
        c_emb = F.linear(c, self.cond_w, self.cond_b)
        if draw:
            self.noise.normal_()  # draw 0: the start; draw k: Euler-Maruyama step k's w
        x = self.x
        x.copy_(self.noise[0])
        ts = self.times.tolist()  # host floats: constants of the graph
        for k in range(s.sampler_steps):
            self.xin.copy_(x.expand(2, N, D))
            v = self.velocity(self.xin.view(2 * N, D), k, c_emb)
            v_cond, v_uncond = v[:N], v[N:]
            if k + 1 < s.sampler_steps:
                t, dt = ts[k], ts[k + 1] - ts[k]
                a = (1.0 + t) * dt
                x.mul_(1.0 - dt).add_(v_cond, alpha=a * cfg).add_(v_uncond, alpha=a * (1.0 - cfg))
                x.add_(self.noise[k + 1], alpha=math.sqrt(2.0 * (1.0 - t) * dt))
            else:  # the final Euler step
                h = s.last_step_size
                x.add_(v_cond, alpha=h * cfg).add_(v_uncond, alpha=h * (1.0 - cfg))
        token = F.layer_norm(x.to(self.dtype), (D,), eps=LAYER_NORM_EPS)
        self.token.copy_(token)
        self.generated.index_copy_(1, self.pos - self.prompt_len, token.unsqueeze(1))

    def bucket_end(self, position: int, bucket: int) -> int:
        """The cache length the step at `position` attends to: its bucket's end (bucket 0: the whole cache)."""
        if bucket <= 0:
            return self.max_len
        return min((position // bucket + 1) * bucket, self.max_len)


# --- the references of --check ---------------------------------------------
def reference_conditions(loop: NextStepLoop, prompt_ids, tokens):
    """Cache-free causal forward over the prompt and tokens[:, :-1] through image_in_projector (both branches):
    the last hidden state (pre-norm) at every position that predicts a token [2N, T, H]."""
    s = loop.s
    N = tokens.shape[0]
    fed = F.linear(tokens[:, :-1], loop.in_w, loop.in_b)
    x = torch.cat([loop.embed[prompt_ids], torch.cat([fed, fed], dim=0)], dim=1)
    R, T, H = x.shape
    cos, sin = rope_tables(s, T)
    cos, sin = cos.to(x.dtype), sin.to(x.dtype)
    causal = torch.ones(T, T, dtype=torch.bool).tril()
    for layer in loop.layers:
        h = F.rms_norm(x, (H,), layer["ln1"], s.rms_eps)
        q, k, v = F.linear(h, layer["qkv"], layer["qkv_b"]).split([loop.q_dim, loop.kv_dim, loop.kv_dim], dim=-1)
        q = rotate(q.view(R, T, s.heads, s.head_dim).transpose(1, 2), cos, sin)
        k = rotate(k.view(R, T, s.kv_heads, s.head_dim).transpose(1, 2), cos, sin)
        v = v.view(R, T, s.kv_heads, s.head_dim).transpose(1, 2)
        group = s.heads // s.kv_heads
        k, v = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(s.head_dim)
        o = torch.softmax(scores.masked_fill(~causal, -math.inf), dim=-1) @ v
        x = x + F.linear(o.transpose(1, 2).reshape(R, T, loop.q_dim), layer["o"])
        h = F.rms_norm(x, (H,), layer["ln2"], s.rms_eps)
        gate, up = F.linear(h, layer["gate_up"]).chunk(2, dim=-1)
        x = x + F.linear(F.silu(gate) * up, layer["down"])
    Lp = prompt_ids.shape[1]
    return x[:, Lp - 1:]


def reference_net(loop: NextStepLoop, x, t: float, c):
    """SimpleMLPAdaLN.forward written out: its time embedding, cond_embed, one adaLN GEMM a block (the
    checkpoint's bias, modulate's 1 + scale), the final layer."""
    s, W = loop.s, loop.s.head_width
    t_row = torch.full((x.shape[0],), t, dtype=torch.float32).to(loop.dtype)
    freq = timestep_frequencies(t_row, s.head_freqs).to(loop.dtype)
    t_emb = F.linear(F.silu(F.linear(freq, loop.time_w1, loop.time_b1)), loop.time_w2, loop.time_b2)
    y = t_emb + F.linear(c, loop.cond_w, loop.cond_b)
    h = F.linear(x, loop.input_w, loop.input_b)
    for b, blk in enumerate(loop.blocks):
        rows = slice(3 * W * b, 3 * W * (b + 1))
        shift, scale, gate = F.linear(F.silu(y), loop.mod_w[rows], loop.mod_b[rows]).chunk(3, dim=-1)
        hn = F.layer_norm(h, (W,), blk["ln_w"], blk["ln_b"], LAYER_NORM_EPS) * (1 + scale) + shift
        h = h + gate * F.linear(F.silu(F.linear(hn, blk["fc1"], blk["fc1_b"])), blk["fc2"], blk["fc2_b"])
    rows = slice(3 * W * s.head_blocks, None)
    shift, scale = F.linear(F.silu(y), loop.mod_w[rows], loop.mod_b[rows]).chunk(2, dim=-1)
    return F.linear(F.layer_norm(h, (W,), eps=LAYER_NORM_EPS) * (1 + scale) + shift, loop.final_w, loop.final_b)


def reference_token(loop: NextStepLoop, hidden, noise):
    """FlowMatchingHead.sample on image_out_projector(norm(hidden)) with the given draws, then use_norm."""
    s, cfg = loop.s, loop.cfg
    c = F.linear(F.rms_norm(hidden, (s.hidden,), loop.final_norm, s.rms_eps), loop.out_w, loop.out_b)
    ts = time_grid(s).double()

    def guided(x, t):
        v_cond, v_uncond = reference_net(loop, torch.cat([x, x]), t, c).chunk(2)
        return v_uncond + cfg * (v_cond - v_uncond)

    x = noise[0].to(loop.dtype)
    for k in range(s.sampler_steps - 1):
        t, dt = ts[k].item(), (ts[k + 1] - ts[k]).item()
        v = guided(x, t)
        alpha, d_alpha, sigma, d_sigma = t, 1.0, 1.0 - t, -1.0
        var = sigma ** 2 - (alpha / d_alpha) * d_sigma * sigma
        score = ((alpha / d_alpha) * v - x) / var
        drift = v + sigma * score
        x = x + drift * dt + math.sqrt(2 * sigma) * (noise[k + 1].to(loop.dtype) * math.sqrt(dt))
    x = x + guided(x, ts[-1].item()) * s.last_step_size
    return F.layer_norm(x, (s.token_dim,), eps=LAYER_NORM_EPS)


def check(s: NextStepShape, run) -> bool:
    """Teacher-forced float64 run on the CPU: the conditions against a cache-free forward, the tokens against
    the official sampler written out, on the same noise."""
    loop = NextStepLoop(s, torch.device("cpu"), torch.float64, run.cfg, std=0.3)
    images = 2
    loop.allocate(images, run.prompt_len)
    gen = torch.Generator().manual_seed(5)
    prompt = torch.randint(0, s.vocab, (2 * images, run.prompt_len), generator=gen)
    ends = [loop.bucket_end(p, run.kv_bucket) for p in range(run.prompt_len, run.prompt_len + s.image_tokens - 1)]
    hiddens, noises = [], []
    with torch.inference_mode():
        loop.prefill(prompt)
        for i in range(s.image_tokens):
            if i > 0:
                loop.decoder_step(ends[i - 1])
            hiddens.append(loop.hidden.clone())
            loop.noise.copy_(torch.randn(loop.noise.shape, generator=gen, dtype=torch.float64))
            noises.append(loop.noise.clone())
            loop.head(draw=False)
        tokens = loop.generated.clone()
        conditions = torch.stack(hiddens, dim=1)  # [2N, T, H]
        ref_conditions = reference_conditions(loop, prompt, tokens)
        ref_tokens = torch.stack([reference_token(loop, hiddens[i], noises[i]) for i in range(s.image_tokens)], 1)
    cond_err = (conditions - ref_conditions).abs().max().item()
    token_err = (tokens - ref_tokens).abs().max().item()
    finite = bool(torch.isfinite(tokens).all())
    ok = cond_err < 1e-9 and token_err < 1e-9 and finite and tokens.abs().max().item() > 0
    print(f"check {s.name}: static-cache conditions vs a cache-free forward max |diff| {cond_err:.1e}, sampled tokens "
          f"vs the official sampler written out {token_err:.1e} ({images} images x {s.image_tokens} tokens, "
          f"{s.sampler_steps} sampler steps, CFG {run.cfg}, {len(set(ends))} KV buckets, float64): "
          f"{'ok' if ok else 'FAILED'}")
    loop.free()
    return ok


# --- timing -------------------------------------------------------------------
def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def timed_positions(s: NextStepShape, prompt_len: int, tokens: int) -> list:
    """The decode steps' positions: all 1,023 (tokens = image_tokens) or tokens - 1 of them spread evenly."""
    steps = s.image_tokens - 1
    picked = tokens - 1
    return [prompt_len + (j * steps) // picked for j in range(picked)]


def run_batch(loop: NextStepLoop, images: int, run, device) -> dict:
    s = loop.s
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    loop.allocate(images, run.prompt_len)
    gen = torch.Generator().manual_seed(11)
    prompt = torch.randint(0, s.vocab, (2 * images, run.prompt_len), generator=gen).to(device)
    positions = timed_positions(s, run.prompt_len, run.tokens)
    consecutive = run.tokens == s.image_tokens
    ends = [loop.bucket_end(p, run.kv_bucket) for p in positions]
    graphs = device.type == "cuda" and not run.no_graph
    decoder_graphs, head_graph = {}, None
    capture_s = 0.0
    with torch.inference_mode():
        loop.prefill(prompt)  # warm-up (kernels, allocator)
        loop.head()
        if graphs:
            t = time.perf_counter()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for end in sorted(set(ends)):
                    for _ in range(2):
                        loop.decoder_step(end)
                        loop.head()
                    loop.pos.fill_(run.prompt_len)
            torch.cuda.current_stream().wait_stream(side)
            pool = None
            for end in sorted(set(ends)):  # replayed one at a time: one memory pool for all
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=pool):
                    loop.decoder_step(end)
                pool = graph.pool()
                decoder_graphs[end] = graph
            head_graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(head_graph, pool=pool):
                loop.head()
            sync(device)
            capture_s = time.perf_counter() - t
        else:
            loop.decoder_step(ends[0])  # eager warm-up
            loop.head()

        def decoder(end):
            if graphs:
                decoder_graphs[end].replay()
            else:
                loop.decoder_step(end)

        def head():
            head_graph.replay() if graphs else loop.head()

        # The timed generation: prefill (fills the cache, samples token 0), then the decode steps.
        sync(device)
        t0 = time.perf_counter()
        loop.prefill(prompt)
        head()
        sync(device)
        t1 = time.perf_counter()
        cuda_events = device.type == "cuda"
        decoder_ms = head_ms = 0.0
        if cuda_events:
            marks = [torch.cuda.Event(enable_timing=True) for _ in range(2 * len(positions) + 1)]
            marks[0].record()
        for i, (position, end) in enumerate(zip(positions, ends)):
            if not consecutive:
                loop.pos.fill_(position)
            if cuda_events:
                decoder(end)
                marks[2 * i + 1].record()
                head()
                marks[2 * i + 2].record()
            else:
                a = time.perf_counter()
                decoder(end)
                b = time.perf_counter()
                head()
                decoder_ms += 1e3 * (b - a)
                head_ms += 1e3 * (time.perf_counter() - b)
        sync(device)
        t2 = time.perf_counter()
        if cuda_events:
            for i in range(len(positions)):
                decoder_ms += marks[2 * i].elapsed_time(marks[2 * i + 1])
                head_ms += marks[2 * i + 1].elapsed_time(marks[2 * i + 2])
        last = positions[-1] + 1
        ok = int(loop.pos.item()) == last
        written = loop.generated[:, [0] + [p + 1 - run.prompt_len for p in positions]]
        ok = ok and bool(torch.isfinite(written.float()).all().item())
    peak = torch.cuda.max_memory_allocated() / 1e9 if device.type == "cuda" else 0.0
    del decoder_graphs, head_graph
    loop.free()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    steps = len(positions)
    prefill_s, measured_s = t1 - t0, t2 - t1
    step_ms = 1e3 * measured_s / steps
    decode_s = measured_s if consecutive else step_ms * (s.image_tokens - 1) / 1e3
    return dict(images=images, prefill_s=prefill_s, decode_s=decode_s, measured_decode_s=measured_s,
                timed_steps=steps, all_steps=s.image_tokens - 1, extrapolated=not consecutive, step_ms=step_ms,
                decoder_ms=decoder_ms / steps, head_ms=head_ms / steps, img_per_s=images / (prefill_s + decode_s),
                capture_s=capture_s, decoder_graphs=len(set(ends)) if graphs else 0, peak_gb=peak, ok=ok)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batches", default="", help="images per batch, e.g. 1,16,64 (default 1,16,64; tiny: 2)")
    p.add_argument("--tokens", type=int, default=0,
                   help="image tokens to time, 2..1024 (default: all 1,024; fewer: their steps spread over the image, "
                        "the image's decode time extrapolated)")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--tiny", action="store_true", help="a tiny shape of the same structure (CPU smoke test)")
    p.add_argument("--check", action="store_true", help="tiny: float64 against a cache-free forward and the "
                                                        "official sampler written out")
    p.add_argument("--prompt-len", type=int, default=0, help="prompt tokens a row (default 50; tiny 8)")
    p.add_argument("--cfg", type=float, default=None, help="guidance on the velocity, > 1 (default 7.5)")
    p.add_argument("--kv-bucket", type=int, default=None,
                   help="cache positions a decoder graph's attention covers, a multiple of 16; 0: the whole cache "
                        "(default 1024; tiny 16)")
    p.add_argument("--no-graph", action="store_true", help="eager steps (for comparison)")
    p.add_argument("--out", default="", help="append one JSON line per batch")
    args = p.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("--device cuda: no CUDA device", file=sys.stderr)
        return 2
    if args.check and not args.tiny:
        print("--check needs --tiny", file=sys.stderr)
        return 2
    s = TINY if args.tiny else PUBLISHED
    run = argparse.Namespace(prompt_len=args.prompt_len or s.prompt_len, tokens=args.tokens or s.image_tokens,
                             cfg=s.cfg if args.cfg is None else args.cfg, no_graph=args.no_graph,
                             kv_bucket=(16 if args.tiny else 1024) if args.kv_bucket is None else args.kv_bucket)
    errors = []
    if not 2 <= run.tokens <= s.image_tokens:
        errors.append(f"--tokens {run.tokens}: must lie in [2, {s.image_tokens}]")
    if run.prompt_len < 1:
        errors.append(f"--prompt-len {run.prompt_len}: must be >= 1")
    if not (math.isfinite(run.cfg) and run.cfg > 1):
        errors.append(f"--cfg {run.cfg}: must be finite and > 1 (the loop always runs both branches)")
    if run.kv_bucket < 0 or run.kv_bucket % 16:
        errors.append(f"--kv-bucket {run.kv_bucket}: must be 0 (the whole cache) or a multiple of 16")
    try:
        batches = [int(b) for b in args.batches.split(",")] if args.batches else ([2] if args.tiny else [1, 16, 64])
        if min(batches) < 1:
            raise ValueError
    except ValueError:
        errors.append(f"--batches {args.batches}: expected positive integers, e.g. 1,16,64")
    if errors:
        print("\n".join(errors), file=sys.stderr)
        return 2
    device = torch.device(args.device)
    if args.tiny and device.type == "cpu":
        torch.set_num_threads(1)  # tiny tensors gain nothing from threads; a loaded CI machine loses a lot
    all_ok = True
    if args.check:
        all_ok = check(s, run)
    t = time.perf_counter()
    loop = NextStepLoop(s, device, torch.bfloat16, run.cfg)
    sync(device)
    setup_s = time.perf_counter() - t
    n = loop.params()
    graphs = device.type == "cuda" and not run.no_graph
    print(f"# {s.name}: {sum(n.values()) / 1e9:.2f} G params in bf16 (decoder layers {n['decoder'] / 1e9:.2f} G, "
          f"embeddings {n['embed'] / 1e9:.2f} G, projectors {n['projectors'] / 1e6:.1f} M, head {n['head'] / 1e6:.1f} M), "
          f"random weights on {device.type} in {setup_s:.1f} s; prompt {run.prompt_len} a row, {s.image_tokens} tokens "
          f"({s.side} x {s.side}, {s.token_dim}-dim), CFG {run.cfg} on the velocity, {s.sampler_steps} sampler steps, "
          f"timed {run.tokens - 1} of {s.image_tokens - 1} decode steps, KV bucket {run.kv_bucket or 'whole cache'}, "
          f"graphs {'on' if graphs else 'off'}", flush=True)
    print(f"{'model':<12} {'policy':<10} {'images':>6} {'prefill_s':>9} {'decode_s':>9} {'step_ms':>9} {'head_ms':>9} "
          f"{'img/s':>8} | head% capture_s peak_GB timed_steps")
    out = open(args.out, "a") if args.out else None
    for images in batches:
        try:
            r = run_batch(loop, images, run, device)
        except torch.OutOfMemoryError as e:  # a batch the card cannot hold: say so, go on
            print(f"{s.name:<12} {'torch-loop':<10} {images:>6}  out of memory ({str(e).splitlines()[0]})", flush=True)
            loop.free()
            torch.cuda.empty_cache()
            all_ok = False
            continue
        all_ok = all_ok and r["ok"]
        share = 100.0 * r["head_ms"] / r["step_ms"] if r["step_ms"] > 0 else 0.0
        kind = "extrapolated" if r["extrapolated"] else "measured"
        print(f"{s.name:<12} {'torch-loop':<10} {images:>6} {r['prefill_s']:>9.3f} {r['decode_s']:>9.3f} "
              f"{r['step_ms']:>9.3f} {r['head_ms']:>9.3f} {r['img_per_s']:>8.3f} | {share:.1f} {r['capture_s']:.2f} "
              f"{r['peak_gb']:.1f} {r['timed_steps']}/{r['all_steps']} {kind}"
              + ("" if r["ok"] else "  (state check FAILED)"), flush=True)
        clock = "CUDA events around each graph" if device.type == "cuda" else "host clock around each piece"
        print(f"split {s.name} torch-loop images={images}: step {r['step_ms']:.3f} ms = decoder {r['decoder_ms']:.3f} "
              f"ms + head {r['head_ms']:.3f} ms ({share:.1f}% of the step; {clock}, {r['timed_steps']} steps); one "
              f"batch {r['prefill_s'] + r['decode_s']:.2f} s "
              f"({'extrapolated: prefill + ' + str(r['all_steps']) + ' x the mean step' if r['extrapolated'] else 'measured'})",
              flush=True)
        if out:
            out.write(json.dumps(dict(kind="torch_loop", model=s.name, **r)) + "\n")
            out.flush()
    if out:
        out.close()
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
