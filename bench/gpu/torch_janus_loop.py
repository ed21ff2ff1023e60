#!/usr/bin/env python3
"""The careful PyTorch loop of issues #13, #29 and #30: the baseline argen_bench is compared with.

A random-weight generation loop for argen_bench's model shapes (--model: 7b
and 1b Janus-Pro, llamagen-<size>-<px> LlamaGen class-conditional, emu3
Emu3-Gen 720 px; torch_loop_shapes.py has the published numbers), written the
way a careful PyTorch user would: bf16 weights, q|k|v and gate|up fused into
one weight each, a static KV cache [rows, kv heads, prompt + image tokens,
head_dim] per layer, F.scaled_dot_product_attention over the cache with a mask
of the filled positions (grouped-query heads as queries of their KV head: no
K/V copy), and the whole decode step (image-token embedding -> the layers ->
the head -> CFG -> sampling on the GPU -> next token and position) captured in
one CUDA graph per KV bucket (--kv-bucket positions: the step attends to the
cache up to its bucket's end, so a long sequence does not read the unfilled
cache; 576 or 256 tokens fit one bucket, Emu3's 8,241 take nine), replayed
image_tokens - 1 times.

Per family: Janus embeds codes through gen_embed and the aligner MLP and maps
the last hidden state through gen_head; LlamaGen's prompt is the class token
(the unconditional class, the table's last row, on the guidance row), codes
embed through tok_embeddings, the head is `output`, and RoPE is LlamaGen's 2-D
rotation (pair j < head_dim/4 turns with the code's row, the rest with its
column; the class slot has cos = sin = 0), in the half-split pair layout
rather than gpt.py's interleaved pairs: a fixed permutation of the q/k
channels, the same arithmetic and cost; Emu3 embeds code k as token
first_visual + k of its one table and computes the head over the visual rows
only (the prefix constraint masks the rest; argen does the same). Every step
samples a code, as argen_bench does (Emu3's forced row ends change no cost).
CFG: 2 rows per image (the prompt and the unconditional prompt), logits =
uncond + cfg * (cond - uncond); sampling as argen_bench's (temperature 1,
top-k off) unless --temperature / --top-k say otherwise.

Timing is argen_bench's: wall time with the device synchronised, the prompts'
prefill included, img/s = images / (prefill_s + decode_s); the graphs are
captured (and warmed) before the clock starts, as a careful loop would; the
capture time is printed apart. Output lines:

  model policy images prefill_s decode_s step_ms img/s | capture_s peak_GB

Usage (the device has torch; nothing to install):
  python3 bench/gpu/torch_janus_loop.py --model 7b --batches 16,64,128
  python3 bench/gpu/torch_janus_loop.py --model llamagen-xl-256 --batches 1,16,64
  python3 bench/gpu/torch_janus_loop.py --model emu3 --batches 1,16 --out results.jsonl
  python3 bench/gpu/torch_janus_loop.py --device cpu --tiny --check --model 7b,llamagen-xl-256,emu3   # ctest

--tiny runs each model's family at a tiny size; --check (tiny only) decodes
greedily in float32 and compares every token with a cache-free full causal
forward over the same sequence: the static cache, the buckets, RoPE positions
and the mask must reproduce plain attention exactly.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from types import SimpleNamespace

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # the ctest skips (77) where torch is not installed
    print("torch is not installed", file=sys.stderr)
    sys.exit(77)

from torch_loop_shapes import Shape, shape_for, tiny_shape

DEFAULT_BATCHES = {"7b": [16, 64, 128], "1b": [64, 128, 256], "emu3": [1, 16]}  # llamagen-*: 1, 16, 64


class ArLoop:
    """Random weights of one shape and the decode state for one batch of images."""

    def __init__(self, shape: Shape, device: torch.device, dtype: torch.dtype, std: float = 0.02, seed: int = 0):
        self.s = shape
        self.device, self.dtype = device, dtype
        g = torch.Generator(device=device).manual_seed(seed)
        H, I, hd = shape.hidden, shape.inter, shape.head_dim
        self.hd = hd
        self.q_dim = shape.heads * hd
        self.kv_dim = shape.kv_heads * hd

        def rand(*size):  # generated where it lives (7B: seconds on the GPU)
            return torch.randn(*size, generator=g, device=device, dtype=dtype).mul_(std)

        def ones(n):
            return torch.ones(n, device=device, dtype=dtype)

        # The prompt table: Janus's text embeddings, LlamaGen's class table, Emu3's whole vocabulary.
        self.prompt_table = rand(shape.prompt_vocab, H)
        if shape.family == "janus":
            self.gen_embed = rand(shape.image_vocab, shape.image_embed)
            self.fc1_w, self.fc1_b = rand(H, shape.image_embed), rand(H)
            self.fc2_w, self.fc2_b = rand(H, H), rand(H)
        elif shape.family == "llamagen":
            self.tok_embed = rand(shape.image_vocab, H)
        self.layers = []
        for _ in range(shape.layers):
            self.layers.append(dict(
                ln1=ones(H), qkv=rand(self.q_dim + 2 * self.kv_dim, H), o=rand(H, self.q_dim),
                ln2=ones(H), gate_up=rand(2 * I, H), down=rand(H, I)))
        self.final_norm = ones(H)
        if shape.family == "janus":
            self.head_proj_w, self.head_proj_b = rand(shape.head_embed, H), rand(shape.head_embed)
            self.head_out_w, self.head_out_b = rand(shape.image_vocab, shape.head_embed), rand(shape.image_vocab)
        elif shape.family == "llamagen":
            self.head_w = rand(shape.image_vocab, H)
        else:  # emu3: lm_head over the whole vocabulary, used through its visual rows (a contiguous view)
            self.lm_head = rand(shape.prompt_vocab, H)
            self.head_w = self.lm_head[shape.first_visual:shape.first_visual + shape.image_vocab]

    def decoder_params(self) -> int:
        return sum(w.numel() for layer in self.layers for w in layer.values())

    # --- batch state -------------------------------------------------------
    def allocate(self, images: int, prompt_len: int, image_tokens: int):
        s, dev = self.s, self.device
        self.images, self.rows = images, 2 * images
        self.prompt_len, self.image_tokens = prompt_len, image_tokens
        # Cache length padded to a multiple of 16 so SDPA's fused kernels take the masked static cache.
        self.max_len = (prompt_len + image_tokens + 15) // 16 * 16
        self.k_cache = [torch.zeros(self.rows, s.kv_heads, self.max_len, self.hd, device=dev, dtype=self.dtype)
                        for _ in range(s.layers)]
        self.v_cache = [torch.zeros_like(k) for k in self.k_cache]
        cos, sin = rope_table(s, self.max_len, prompt_len)
        self.cos, self.sin = cos.to(dev, self.dtype), sin.to(dev, self.dtype)
        self.positions = torch.arange(self.max_len, device=dev)
        # Static step inputs/outputs (the graphs' buffers).
        self.pair_tokens = torch.zeros(images, dtype=torch.long, device=dev)
        self.pos = torch.zeros(1, dtype=torch.long, device=dev)
        self.mask = torch.zeros(1, 1, 1, self.max_len, dtype=torch.bool, device=dev)
        self.generated = torch.zeros(images, image_tokens, dtype=torch.long, device=dev)

    def free(self):
        for name in ("k_cache", "v_cache", "cos", "sin", "positions", "pair_tokens", "pos", "mask", "generated"):
            if hasattr(self, name):
                delattr(self, name)

    def make_prompt(self, images: int, prompt_len: int, gen: torch.Generator) -> torch.Tensor:
        """[2 images, prompt_len] ids, rows (cond, uncond) per image."""
        s = self.s
        if s.family == "llamagen":  # a class each; the guidance row is the unconditional class (the last row)
            ids = torch.randint(0, s.prompt_vocab - 1, (2 * images, prompt_len), generator=gen)
            ids[1::2] = s.prompt_vocab - 1
        elif s.family == "emu3":  # text ids (below the visual codes)
            ids = torch.randint(0, s.first_visual, (2 * images, prompt_len), generator=gen)
        else:
            ids = torch.randint(0, s.prompt_vocab, (2 * images, prompt_len), generator=gen)
        return ids.to(self.device)

    # --- pieces ------------------------------------------------------------
    @staticmethod
    def rotate_half(x):
        a, b = x.chunk(2, dim=-1)
        return torch.cat([-b, a], dim=-1)

    @staticmethod
    def rope(x, cos, sin):  # x [..., T, hd]; cos/sin [T, hd]
        return x * cos + ArLoop.rotate_half(x) * sin

    def attention_block(self, x, layer, l, cos, sin, write_at, attend):
        """x [R, T, H]. write_at: positions (device, T) of these tokens; attend(q, k_cache, v_cache)."""
        R, T, H = x.shape
        s = self.s
        h = F.rms_norm(x, (H,), layer["ln1"], s.rms_eps)
        qkv = F.linear(h, layer["qkv"])
        q, k, v = qkv.split([self.q_dim, self.kv_dim, self.kv_dim], dim=-1)
        q = q.view(R, T, s.heads, self.hd).transpose(1, 2)
        k = k.view(R, T, s.kv_heads, self.hd).transpose(1, 2)
        v = v.view(R, T, s.kv_heads, self.hd).transpose(1, 2)
        q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
        self.k_cache[l].index_copy_(2, write_at, k)
        self.v_cache[l].index_copy_(2, write_at, v)
        o = attend(q, self.k_cache[l], self.v_cache[l])
        x = x + F.linear(o.transpose(1, 2).reshape(R, T, self.q_dim), layer["o"])
        h = F.rms_norm(x, (H,), layer["ln2"], s.rms_eps)
        gate, up = F.linear(h, layer["gate_up"]).chunk(2, dim=-1)
        return x + F.linear(F.silu(gate) * up, layer["down"])

    def gqa(self):
        return self.s.kv_heads != self.s.heads

    def head_logits(self, h):  # h [R, H] -> fp32 logits [R, image_vocab]
        h = F.rms_norm(h, (h.shape[-1],), self.final_norm, self.s.rms_eps)
        if self.s.family == "janus":
            mid = F.gelu(F.linear(h, self.head_proj_w, self.head_proj_b))
            return F.linear(mid, self.head_out_w, self.head_out_b).float()
        return F.linear(h, self.head_w).float()

    def sample(self, logits, cfg, temperature, top_k, greedy):
        cond, uncond = logits[0::2], logits[1::2]
        g = uncond + cfg * (cond - uncond)
        if greedy:
            return g.argmax(dim=-1)
        g = g / temperature
        if top_k > 0:
            kth = torch.topk(g, top_k, dim=-1).values[:, -1:]
            g = torch.where(g >= kth, g, torch.full_like(g, -math.inf))
        probs = torch.softmax(g, dim=-1)
        # Exponential race: argmax(p / E), E ~ Exp(1), draws from p (no host sync, capturable).
        race = torch.empty_like(probs).exponential_(1.0)
        return (probs / race).argmax(dim=-1)

    def image_embed(self, pair_tokens):  # codes [P] -> [2P, H], rows (cond, uncond) per pair
        s = self.s
        if s.family == "janus":
            e = self.gen_embed[pair_tokens]
            a = F.linear(F.gelu(F.linear(e, self.fc1_w, self.fc1_b)), self.fc2_w, self.fc2_b)
        elif s.family == "llamagen":
            a = self.tok_embed[pair_tokens]
        else:
            a = self.prompt_table[pair_tokens + s.first_visual]
        P, H = a.shape
        return a.unsqueeze(1).expand(P, 2, H).reshape(2 * P, H)

    # --- prefill and the decode step ---------------------------------------
    def prefill(self, prompt_ids, cfg, temperature, top_k, greedy=False):
        """prompt_ids [R, Lp]: fills the cache at [0, Lp) and samples image token 0."""
        x = self.prompt_table[prompt_ids]
        Lp = prompt_ids.shape[1]
        write_at = self.positions[:Lp]
        cos, sin = self.cos[:Lp], self.sin[:Lp]
        gqa = self.gqa()

        def attend(q, kc, vc):
            return F.scaled_dot_product_attention(q, kc[:, :, :Lp], vc[:, :, :Lp], is_causal=True, enable_gqa=gqa)

        for l, layer in enumerate(self.layers):
            x = self.attention_block(x, layer, l, cos, sin, write_at, attend)
        tok = self.sample(self.head_logits(x[:, -1]), cfg, temperature, top_k, greedy)
        self.pair_tokens.copy_(tok)
        self.generated[:, 0] = tok
        self.pos.fill_(Lp)

    def step(self, attend_len, cfg, temperature, top_k, greedy=False):
        """One decode step on the static buffers: embeds pair_tokens at position pos (< attend_len), samples the next.

        The attention reads cache positions [0, attend_len) (the step's bucket), masked to <= pos."""
        x = self.image_embed(self.pair_tokens).unsqueeze(1)  # [R, 1, H]
        torch.le(self.positions, self.pos, out=self.mask.view(-1))
        mask = self.mask[..., :attend_len]
        cos, sin = self.cos.index_select(0, self.pos), self.sin.index_select(0, self.pos)

        def attend(q, kc, vc):
            # The query heads of one KV head as that head's queries (grouped-query attention without
            # repeating K/V; plain MHA when the counts match): q [R, Hq, 1, hd] -> [R, Hkv, Hq / Hkv, hd].
            R, Hq, _, hd = q.shape
            Hkv = kc.shape[1]
            o = F.scaled_dot_product_attention(q.reshape(R, Hkv, Hq // Hkv, hd), kc[:, :, :attend_len],
                                               vc[:, :, :attend_len], attn_mask=mask)
            return o.reshape(R, Hq, 1, hd)

        for l, layer in enumerate(self.layers):
            x = self.attention_block(x, layer, l, cos, sin, self.pos, attend)
        tok = self.sample(self.head_logits(x[:, 0]), cfg, temperature, top_k, greedy)
        self.pair_tokens.copy_(tok)
        # Token i (i >= 1) is sampled at position prompt_len + i - 1.
        self.generated.index_copy_(1, self.pos - (self.prompt_len - 1), tok.unsqueeze(1))
        self.pos.add_(1)

    def bucket_end(self, position: int, bucket: int) -> int:
        """The cache length the step at `position` attends to: its bucket's end (bucket 0: the whole cache)."""
        if bucket <= 0:
            return self.max_len
        return min((position // bucket + 1) * bucket, self.max_len)

    # --- the reference for --check -----------------------------------------
    def full_forward_logits(self, prompt_ids, generated):
        """Cache-free causal forward over prompt + generated[:, :-1]; fp32 logits at every predicting position."""
        R = prompt_ids.shape[0]
        seq = [self.prompt_table[prompt_ids]]
        for i in range(generated.shape[1] - 1):
            seq.append(self.image_embed(generated[:, i]).unsqueeze(1))
        x = torch.cat(seq, dim=1)
        T, H = x.shape[1], x.shape[2]
        cos, sin = self.cos[:T], self.sin[:T]
        s = self.s
        for layer in self.layers:
            h = F.rms_norm(x, (H,), layer["ln1"], s.rms_eps)
            q, k, v = F.linear(h, layer["qkv"]).split([self.q_dim, self.kv_dim, self.kv_dim], dim=-1)
            q = self.rope(q.view(R, T, s.heads, self.hd).transpose(1, 2), cos, sin)
            k = self.rope(k.view(R, T, s.kv_heads, self.hd).transpose(1, 2), cos, sin)
            v = v.view(R, T, s.kv_heads, self.hd).transpose(1, 2)
            rep = s.heads // s.kv_heads
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd)
            causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            o = torch.softmax(scores.masked_fill(~causal, -math.inf), dim=-1) @ v
            x = x + F.linear(o.transpose(1, 2).reshape(R, T, self.q_dim), layer["o"])
            h = F.rms_norm(x, (H,), layer["ln2"], s.rms_eps)
            gate, up = F.linear(h, layer["gate_up"]).chunk(2, dim=-1)
            x = x + F.linear(F.silu(gate) * up, layer["down"])
        Lp = prompt_ids.shape[1]
        return self.head_logits(x[:, Lp - 1:].reshape(-1, H)).view(R, -1, s.image_vocab)


def rope_table(s: Shape, max_len: int, prompt_len: int):
    """fp32 cos, sin [max_len, head_dim] in the half-split layout (channel j pairs with j + head_dim / 2).

    1-D: position p turns pair j by p * theta^(-2j / head_dim). LlamaGen's 2-D: image token i sits at
    position prompt_len + i on cell (i // grid, i % grid); pair j < head_dim / 4 turns with the row, the
    others with the column, by theta^(-4j' / head_dim) (gpt.py's precompute_freqs_cis_2d); the prompt
    slots get cos = sin = 0."""
    hd = s.head_dim
    if s.grid == 0:
        inv = 1.0 / (s.rope_theta ** (torch.arange(0, hd, 2, dtype=torch.float32) / hd))
        angles = torch.outer(torch.arange(max_len, dtype=torch.float32), inv)
        cos, sin = angles.cos(), angles.sin()
    else:
        half = hd // 2
        inv = 1.0 / (s.rope_theta ** (torch.arange(0, half, 2, dtype=torch.float32)[: half // 2] / half))
        cell = (torch.arange(max_len) - prompt_len).clamp(min=0)
        row, col = (cell // s.grid).float(), (cell % s.grid).float()
        angles = torch.cat([torch.outer(row, inv), torch.outer(col, inv)], dim=-1)
        cos, sin = angles.cos(), angles.sin()
        cos[:prompt_len] = 0.0
        sin[:prompt_len] = 0.0
    return torch.cat([cos, cos], dim=-1), torch.cat([sin, sin], dim=-1)


def check_rope_2d(s: Shape, prompt_len: int, image_tokens: int) -> bool:
    """rope_table's 2-D rotation == LlamaGen's, written out from its definition in gpt.py's layout.

    There, pair j is channels (2j, 2j + 1); pair j < head_dim / 4 turns by row * theta^(-4j / head_dim), pair
    head_dim / 4 + j by column * the same; the prompt slots are multiplied by cos = sin = 0. Here pair j is
    channels (j, j + head_dim / 2): the same rotation under that channel permutation."""
    hd, quarter, T = s.head_dim, s.head_dim // 4, prompt_len + image_tokens
    x = torch.randn(T, hd, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    reference = torch.zeros_like(x)
    for t in range(prompt_len, T):
        row, col = divmod(t - prompt_len, s.grid)
        for j in range(hd // 2):
            angle = (row if j < quarter else col) * s.rope_theta ** (-4 * (j % quarter) / hd)
            a, b = x[t, 2 * j], x[t, 2 * j + 1]
            reference[t, 2 * j] = a * math.cos(angle) - b * math.sin(angle)
            reference[t, 2 * j + 1] = a * math.sin(angle) + b * math.cos(angle)
    perm = list(range(0, hd, 2)) + list(range(1, hd, 2))  # half-split channel k is gpt.py's channel perm[k]
    cos, sin = rope_table(s, T, prompt_len)
    ours = ArLoop.rope(x[:, perm], cos.double(), sin.double())
    same = torch.allclose(ours, reference[:, perm], atol=1e-6)
    print(f"check 2-D RoPE: the half-split table {'==' if same else '!='} gpt.py's interleaved rotation "
          f"(grid {s.grid}, head_dim {hd}, {prompt_len} prompt slots)")
    return same


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def step_positions(run) -> range:
    """The positions of the decode steps: token 0 comes from the prefill, token i >= 1 from the step at
    prompt_len + i - 1."""
    return range(run.prompt_len, run.prompt_len + run.image_tokens - 1)


def run_batch(loop: ArLoop, images: int, run, device) -> dict:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    loop.allocate(images, run.prompt_len, run.image_tokens)
    gen = torch.Generator(device="cpu").manual_seed(11)
    prompt = loop.make_prompt(images, run.prompt_len, gen)
    ends = [loop.bucket_end(p, run.kv_bucket) for p in step_positions(run)]

    def step(end):
        loop.step(end, run.cfg, run.temperature, run.top_k)

    graphs = {}
    capture_s = 0.0
    with torch.inference_mode():
        loop.prefill(prompt, run.cfg, run.temperature, run.top_k)  # warm-up (kernels, allocator)
        if device.type == "cuda" and not run.no_graph:
            t = time.perf_counter()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for end in sorted(set(ends)):
                    for _ in range(2):
                        step(end)
                    loop.pos.fill_(run.prompt_len)
            torch.cuda.current_stream().wait_stream(side)
            pool = None
            for end in sorted(set(ends)):  # one graph a bucket, sharing one memory pool (replayed one at a time)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph, pool=pool):
                    step(end)
                pool = graph.pool()
                graphs[end] = graph
            sync(device)
            capture_s = time.perf_counter() - t
        else:
            step(ends[0])  # eager warm-up
        plan = [graphs[e].replay if graphs else (lambda e=e: step(e)) for e in ends]
        # The timed generation: prefill (fills the cache, samples token 0) + image_tokens - 1 steps.
        sync(device)
        t0 = time.perf_counter()
        loop.prefill(prompt, run.cfg, run.temperature, run.top_k)
        sync(device)
        t1 = time.perf_counter()
        for run_step in plan:
            run_step()
        sync(device)
        t2 = time.perf_counter()
        ok = int(loop.pos.item()) == run.prompt_len + run.image_tokens - 1
        tokens_ok = bool(((loop.generated >= 0) & (loop.generated < loop.s.image_vocab)).all().item())
    peak = torch.cuda.max_memory_allocated() / 1e9 if device.type == "cuda" else 0.0
    del graphs, plan
    loop.free()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    prefill_s, decode_s = t1 - t0, t2 - t1
    return dict(images=images, prefill_s=prefill_s, decode_s=decode_s,
                step_ms=1e3 * decode_s / max(1, run.image_tokens - 1), img_per_s=images / (prefill_s + decode_s),
                capture_s=capture_s, graphs=len(set(ends)), peak_gb=peak, ok=ok and tokens_ok)


def check(loop: ArLoop, run, device) -> bool:
    """Greedy cached decode == greedy decode from the cache-free full forward, token for token."""
    images = 2
    loop.allocate(images, run.prompt_len, run.image_tokens)
    gen = torch.Generator(device="cpu").manual_seed(5)
    prompt = loop.make_prompt(images, run.prompt_len, gen)
    ends = [loop.bucket_end(p, run.kv_bucket) for p in step_positions(run)]
    with torch.inference_mode():
        loop.prefill(prompt, run.cfg, 1.0, 0, greedy=True)
        for end in ends:
            loop.step(end, run.cfg, 1.0, 0, greedy=True)
        cached = loop.generated.clone()
        logits = loop.full_forward_logits(prompt, cached)  # [R, image_tokens, V]
        cond, uncond = logits[0::2], logits[1::2]
        reference = (uncond + run.cfg * (cond - uncond)).argmax(dim=-1)
    same = torch.equal(cached, reference)
    print(f"check {run.name} ({loop.s.family}): cached greedy tokens {'==' if same else '!='} full-forward greedy "
          f"tokens ({images} images x {run.image_tokens} tokens, {len(set(ends))} KV buckets)")
    if not same:
        print("cached   ", cached.tolist())
        print("reference", reference.tolist())
    loop.free()
    return same


def resolve(name: str, shape: Shape, args) -> SimpleNamespace:
    """One model's run settings: the flags, or the shape's defaults where a flag is not given."""
    run = SimpleNamespace(name=name, prompt_len=args.prompt_len or shape.prompt_len,
                          image_tokens=args.image_tokens or shape.image_tokens,
                          cfg=shape.cfg if args.cfg is None else args.cfg, temperature=args.temperature,
                          top_k=args.top_k, no_graph=args.no_graph,
                          kv_bucket=(16 if args.tiny else 1024) if args.kv_bucket is None else args.kv_bucket)
    if shape.grid and run.image_tokens > shape.grid * shape.grid:
        raise ValueError(f"--image-tokens {run.image_tokens}: {name} has {shape.grid * shape.grid} codes")
    if run.kv_bucket < 0 or run.kv_bucket % 16:
        raise ValueError(f"--kv-bucket {run.kv_bucket}: must be 0 (the whole cache) or a multiple of 16")
    return run


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="7b",
                   help="argen_bench's names: 7b, 1b, emu3, llamagen-<size>-<px>, or a comma list")
    p.add_argument("--batches", default="",
                   help="images per batch, e.g. 16,64,128 (default: 7b 16,64,128; 1b 64,128,256; "
                        "llamagen 1,16,64; emu3 1,16)")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--tiny", action="store_true", help="each model's family at a tiny size (CPU smoke test)")
    p.add_argument("--check", action="store_true", help="tiny: greedy cached decode against a cache-free forward")
    p.add_argument("--prompt-len", type=int, default=0, help="prompt tokens a row (default: the model's)")
    p.add_argument("--image-tokens", type=int, default=0, help="tokens an image decodes (default: the model's)")
    p.add_argument("--cfg", type=float, default=None, help="guidance scale (default: the family's)")
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--kv-bucket", type=int, default=None,
                   help="cache positions a graph's attention covers, a multiple of 16; 0: the whole cache "
                        "(default 1024; tiny 16)")
    p.add_argument("--no-graph", action="store_true", help="eager decode steps (for comparison)")
    p.add_argument("--out", default="", help="append one JSON line per run")
    args = p.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("--device cuda: no CUDA device", file=sys.stderr)
        return 2
    if args.check and not args.tiny:
        print("--check needs --tiny", file=sys.stderr)
        return 2
    device = torch.device(args.device)
    if args.tiny and device.type == "cpu":
        torch.set_num_threads(1)  # tiny tensors gain nothing from threads; a loaded CI machine loses a lot
    models = []
    try:
        for name in args.model.split(","):
            shape = tiny_shape(name) if args.tiny else shape_for(name)
            models.append((name, shape, resolve(name, shape, args)))
    except ValueError as e:
        print(e, file=sys.stderr)
        return 2
    torch.manual_seed(0)
    out = open(args.out, "a") if args.out else None
    print(f"{'model':<5} {'policy':<20} {'images':>6} {'prefill_s':>9} {'decode_s':>9} {'step_ms':>9} {'img/s':>8}"
          f" | capture_s peak_GB")
    all_ok = True
    for name, shape, run in models:
        if args.check:
            ok = check(ArLoop(shape, device, torch.float32, std=0.3), run, device)
            if shape.grid:
                ok = check_rope_2d(shape, run.prompt_len, run.image_tokens) and ok
            all_ok = all_ok and ok
        if args.batches:
            batches = [int(b) for b in args.batches.split(",")]
        elif args.tiny:
            batches = [2]
        else:
            batches = DEFAULT_BATCHES.get(name, [1, 16, 64])
        t = time.perf_counter()
        loop = ArLoop(shape, device, torch.bfloat16)
        setup_s = time.perf_counter() - t
        label = f"{name} (tiny {shape.family})" if args.tiny else name
        print(f"# {label}: {loop.decoder_params() / 1e9:.2f} G decoder-layer params (bf16), random weights in "
              f"{setup_s:.1f} s, prompt {run.prompt_len}, image tokens {run.image_tokens}, CFG {run.cfg}, temperature "
              f"{run.temperature}, top-k {run.top_k}, KV bucket {run.kv_bucket or 'whole cache'}, graph "
              f"{'off' if run.no_graph or device.type != 'cuda' else 'on'}")
        for images in batches:
            try:
                r = run_batch(loop, images, run, device)
            except torch.OutOfMemoryError as e:  # a batch the card cannot hold: say so, go on
                print(f"{name:<5} {'torch-loop':<20} {images:>6}  out of memory ({str(e).splitlines()[0]})")
                loop.free()
                torch.cuda.empty_cache()
                all_ok = False
                continue
            all_ok = all_ok and r["ok"]
            print(f"{name:<5} {'torch-loop':<20} {images:>6} {r['prefill_s']:>9.3f} {r['decode_s']:>9.3f} "
                  f"{r['step_ms']:>9.3f} {r['img_per_s']:>8.2f} | {r['capture_s']:.2f} {r['peak_gb']:.1f}"
                  + ("" if r["ok"] else "  (state check FAILED)"), flush=True)
            if out:
                out.write(json.dumps(dict(kind="torch_loop", model=name, **r)) + "\n")
                out.flush()
        del loop
        if device.type == "cuda":
            torch.cuda.empty_cache()
    if out:
        out.close()
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
