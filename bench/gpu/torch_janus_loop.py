#!/usr/bin/env python3
"""The careful PyTorch loop of issue #13: the baseline argen_bench is compared with.

A random-weight Janus-Pro-7B / -1B generation loop written the way a careful
PyTorch user would: bf16 weights, q|k|v and gate|up fused into one weight
each, a static KV cache [rows, heads, prompt + 576, head_dim] per layer,
F.scaled_dot_product_attention over the whole static cache with a mask of the
filled positions, and the whole decode step (gen_embed -> aligner -> 30
layers -> gen_head -> CFG -> top-k/temperature sampling on the GPU -> next
token and position) captured in ONE CUDA graph that is replayed 575 times.
CFG as Janus does it: 2 rows per image (the prompt and the unconditional
prompt), logits = uncond + cfg * (cond - uncond); sampling as argen's default
(temperature 1, top-k off) unless --temperature / --top-k say otherwise.

Timing is argen_bench's: wall time with the device synchronised, prefill of
the 50-token prompts included, img/s = images / (prefill_s + decode_s); the
graph is captured (and warmed) before the clock starts, as a careful loop
would; its capture time is printed apart. Output lines:

  model policy images prefill_s decode_s step_ms img/s

Usage (the device has torch; nothing to install):
  python3 bench/gpu/torch_janus_loop.py --model 7b --batches 16,64,128
  python3 bench/gpu/torch_janus_loop.py --model 1b --batches 64,128,256 --out results.jsonl
  python3 bench/gpu/torch_janus_loop.py --device cpu --tiny --check    # CPU smoke test (ctest)

--check (tiny only) decodes greedily in float32 and compares every token with
a cache-free full causal forward over the same sequence: the static cache,
RoPE positions and mask must reproduce plain attention exactly.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # the ctest skips (77) where torch is not installed
    print("torch is not installed", file=sys.stderr)
    sys.exit(77)

# Janus-Pro language_config / gen_head / gen_aligner (config.json as published;
# bench/gpu/janus_shapes.cc has the same numbers for argen_bench).
SHAPES = {
    "7b": dict(layers=30, hidden=4096, heads=32, kv_heads=32, inter=11008, text_vocab=102400,
               image_vocab=16384, image_embed=8, head_embed=4096),
    "1b": dict(layers=24, hidden=2048, heads=16, kv_heads=16, inter=5632, text_vocab=102400,
               image_vocab=16384, image_embed=8, head_embed=2048),
    "tiny": dict(layers=2, hidden=64, heads=4, kv_heads=2, inter=96, text_vocab=256,
                 image_vocab=64, image_embed=8, head_embed=48),
}
RMS_EPS = 1e-6
ROPE_THETA = 10000.0
IMAGE_TOKENS = 576  # 24 x 24 at 384 px


class JanusLoop:
    """Random weights of one shape and the decode state for one batch of images."""

    def __init__(self, shape: dict, device: torch.device, dtype: torch.dtype, std: float = 0.02, seed: int = 0):
        self.s = shape
        self.device, self.dtype = device, dtype
        g = torch.Generator(device=device).manual_seed(seed)
        H, I, hd = shape["hidden"], shape["inter"], shape["hidden"] // shape["heads"]
        self.hd = hd
        self.q_dim = shape["heads"] * hd
        self.kv_dim = shape["kv_heads"] * hd

        def rand(*size):  # generated where it lives (7B: seconds on the GPU)
            return torch.randn(*size, generator=g, device=device, dtype=dtype).mul_(std)

        def ones(n):
            return torch.ones(n, device=device, dtype=dtype)

        self.text_embed = rand(shape["text_vocab"], H)
        self.gen_embed = rand(shape["image_vocab"], shape["image_embed"])
        self.fc1_w, self.fc1_b = rand(H, shape["image_embed"]), rand(H)
        self.fc2_w, self.fc2_b = rand(H, H), rand(H)
        self.layers = []
        for _ in range(shape["layers"]):
            self.layers.append(dict(
                ln1=ones(H), qkv=rand(self.q_dim + 2 * self.kv_dim, H), o=rand(H, self.q_dim),
                ln2=ones(H), gate_up=rand(2 * I, H), down=rand(H, I)))
        self.final_norm = ones(H)
        self.head_proj_w, self.head_proj_b = rand(shape["head_embed"], H), rand(shape["head_embed"])
        self.head_out_w, self.head_out_b = rand(shape["image_vocab"], shape["head_embed"]), rand(shape["image_vocab"])

    # --- batch state -------------------------------------------------------
    def allocate(self, images: int, prompt_len: int, image_tokens: int):
        s, dev = self.s, self.device
        self.images, self.rows = images, 2 * images
        self.prompt_len, self.image_tokens = prompt_len, image_tokens
        # Cache length padded to a multiple of 16 so SDPA's fused kernels take the masked static cache.
        self.max_len = (prompt_len + image_tokens + 15) // 16 * 16
        kvh = s["kv_heads"]
        self.k_cache = [torch.zeros(self.rows, kvh, self.max_len, self.hd, device=dev, dtype=self.dtype)
                        for _ in range(s["layers"])]
        self.v_cache = [torch.zeros_like(k) for k in self.k_cache]
        inv = 1.0 / (ROPE_THETA ** (torch.arange(0, self.hd, 2, dtype=torch.float32) / self.hd))
        freqs = torch.outer(torch.arange(self.max_len, dtype=torch.float32), inv)
        emb = torch.cat([freqs, freqs], dim=-1)
        self.cos = emb.cos().to(dev, self.dtype)
        self.sin = emb.sin().to(dev, self.dtype)
        self.positions = torch.arange(self.max_len, device=dev)
        # Static step inputs/outputs (the graph's buffers).
        self.pair_tokens = torch.zeros(images, dtype=torch.long, device=dev)
        self.pos = torch.zeros(1, dtype=torch.long, device=dev)
        self.mask = torch.zeros(1, 1, 1, self.max_len, dtype=torch.bool, device=dev)
        self.generated = torch.zeros(images, image_tokens, dtype=torch.long, device=dev)

    def free(self):
        for name in ("k_cache", "v_cache", "cos", "sin", "positions", "pair_tokens", "pos", "mask", "generated"):
            if hasattr(self, name):
                delattr(self, name)

    # --- pieces ------------------------------------------------------------
    @staticmethod
    def rotate_half(x):
        a, b = x.chunk(2, dim=-1)
        return torch.cat([-b, a], dim=-1)

    def rope(self, x, cos, sin):  # x [R, h, T, hd]; cos/sin [T, hd]
        return x * cos + self.rotate_half(x) * sin

    def attention_block(self, x, layer, l, cos, sin, write_at, attend):
        """x [R, T, H]. write_at: positions (device, T) of these tokens; attend(q, k_cache, v_cache)."""
        R, T, H = x.shape
        s = self.s
        h = F.rms_norm(x, (H,), layer["ln1"], RMS_EPS)
        qkv = F.linear(h, layer["qkv"])
        q, k, v = qkv.split([self.q_dim, self.kv_dim, self.kv_dim], dim=-1)
        q = q.view(R, T, s["heads"], self.hd).transpose(1, 2)
        k = k.view(R, T, s["kv_heads"], self.hd).transpose(1, 2)
        v = v.view(R, T, s["kv_heads"], self.hd).transpose(1, 2)
        q, k = self.rope(q, cos, sin), self.rope(k, cos, sin)
        self.k_cache[l].index_copy_(2, write_at, k)
        self.v_cache[l].index_copy_(2, write_at, v)
        o = attend(q, self.k_cache[l], self.v_cache[l])
        x = x + F.linear(o.transpose(1, 2).reshape(R, T, self.q_dim), layer["o"])
        h = F.rms_norm(x, (H,), layer["ln2"], RMS_EPS)
        gate, up = F.linear(h, layer["gate_up"]).chunk(2, dim=-1)
        return x + F.linear(F.silu(gate) * up, layer["down"])

    def gqa(self):
        return self.s["kv_heads"] != self.s["heads"]

    def head_logits(self, h):  # h [R, H] -> fp32 logits [R, V]
        h = F.rms_norm(h, (h.shape[-1],), self.final_norm, RMS_EPS)
        mid = F.gelu(F.linear(h, self.head_proj_w, self.head_proj_b))
        return F.linear(mid, self.head_out_w, self.head_out_b).float()

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

    def image_embed(self, pair_tokens):  # [P] -> [2P, H], rows (cond, uncond) per pair
        e = self.gen_embed[pair_tokens]
        a = F.linear(F.gelu(F.linear(e, self.fc1_w, self.fc1_b)), self.fc2_w, self.fc2_b)
        P, H = a.shape
        return a.unsqueeze(1).expand(P, 2, H).reshape(2 * P, H)

    # --- prefill and the decode step ---------------------------------------
    def prefill(self, prompt_ids, cfg, temperature, top_k, greedy=False):
        """prompt_ids [R, Lp]: fills the cache at [0, Lp) and samples image token 0."""
        x = self.text_embed[prompt_ids]
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

    def step(self, cfg, temperature, top_k, greedy=False):
        """One decode step on the static buffers: embeds pair_tokens at position pos, samples the next."""
        x = self.image_embed(self.pair_tokens).unsqueeze(1)  # [R, 1, H]
        torch.le(self.positions, self.pos, out=self.mask.view(-1))
        cos, sin = self.cos.index_select(0, self.pos), self.sin.index_select(0, self.pos)
        gqa = self.gqa()

        def attend(q, kc, vc):
            return F.scaled_dot_product_attention(q, kc, vc, attn_mask=self.mask, enable_gqa=gqa)

        for l, layer in enumerate(self.layers):
            x = self.attention_block(x, layer, l, cos, sin, self.pos, attend)
        tok = self.sample(self.head_logits(x[:, 0]), cfg, temperature, top_k, greedy)
        self.pair_tokens.copy_(tok)
        # Token i (i >= 1) is sampled at position prompt_len + i - 1.
        self.generated.index_copy_(1, self.pos - (self.prompt_len - 1), tok.unsqueeze(1))
        self.pos.add_(1)

    # --- the reference for --check -----------------------------------------
    def full_forward_logits(self, prompt_ids, generated):
        """Cache-free causal forward over prompt + generated[:, :-1]; fp32 logits at every predicting position."""
        R = prompt_ids.shape[0]
        seq = [self.text_embed[prompt_ids]]
        for i in range(generated.shape[1] - 1):
            seq.append(self.image_embed(generated[:, i]).unsqueeze(1))
        x = torch.cat(seq, dim=1)
        T, H = x.shape[1], x.shape[2]
        cos, sin = self.cos[:T], self.sin[:T]
        s = self.s
        for layer in self.layers:
            h = F.rms_norm(x, (H,), layer["ln1"], RMS_EPS)
            q, k, v = F.linear(h, layer["qkv"]).split([self.q_dim, self.kv_dim, self.kv_dim], dim=-1)
            q = self.rope(q.view(R, T, s["heads"], self.hd).transpose(1, 2), cos, sin)
            k = self.rope(k.view(R, T, s["kv_heads"], self.hd).transpose(1, 2), cos, sin)
            v = v.view(R, T, s["kv_heads"], self.hd).transpose(1, 2)
            rep = s["heads"] // s["kv_heads"]
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
            scores = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd)
            causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            o = torch.softmax(scores.masked_fill(~causal, -math.inf), dim=-1) @ v
            x = x + F.linear(o.transpose(1, 2).reshape(R, T, self.q_dim), layer["o"])
            h = F.rms_norm(x, (H,), layer["ln2"], RMS_EPS)
            gate, up = F.linear(h, layer["gate_up"]).chunk(2, dim=-1)
            x = x + F.linear(F.silu(gate) * up, layer["down"])
        Lp = prompt_ids.shape[1]
        return self.head_logits(x[:, Lp - 1:].reshape(-1, H)).view(R, -1, self.s["image_vocab"])


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize()


def run_batch(loop: JanusLoop, images: int, args, device) -> dict:
    rows = 2 * images
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    loop.allocate(images, args.prompt_len, args.image_tokens)
    gen = torch.Generator(device="cpu").manual_seed(11)
    prompt = torch.randint(0, loop.s["text_vocab"], (rows, args.prompt_len), generator=gen).to(device)
    step = lambda: loop.step(args.cfg, args.temperature, args.top_k)  # noqa: E731
    graph = None
    capture_s = 0.0
    with torch.inference_mode():
        loop.prefill(prompt, args.cfg, args.temperature, args.top_k)  # warm-up (kernels, allocator)
        if device.type == "cuda" and not args.no_graph:
            t = time.perf_counter()
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    step()
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                step()
            sync(device)
            capture_s = time.perf_counter() - t
        else:
            step()  # eager warm-up
        # The timed generation: prefill (fills the cache, samples token 0) + image_tokens - 1 steps.
        sync(device)
        t0 = time.perf_counter()
        loop.prefill(prompt, args.cfg, args.temperature, args.top_k)
        sync(device)
        t1 = time.perf_counter()
        for _ in range(args.image_tokens - 1):
            if graph is not None:
                graph.replay()
            else:
                step()
        sync(device)
        t2 = time.perf_counter()
        ok = int(loop.pos.item()) == args.prompt_len + args.image_tokens - 1
        tokens_ok = bool(((loop.generated >= 0) & (loop.generated < loop.s["image_vocab"])).all().item())
    peak = torch.cuda.max_memory_allocated() / 1e9 if device.type == "cuda" else 0.0
    del graph
    loop.free()
    if device.type == "cuda":
        torch.cuda.empty_cache()
    prefill_s, decode_s = t1 - t0, t2 - t1
    return dict(images=images, prefill_s=prefill_s, decode_s=decode_s,
                step_ms=1e3 * decode_s / max(1, args.image_tokens - 1), img_per_s=images / (prefill_s + decode_s),
                capture_s=capture_s, peak_gb=peak, ok=ok and tokens_ok)


def check(loop: JanusLoop, args, device) -> bool:
    """Greedy cached decode == greedy decode from the cache-free full forward, token for token."""
    images = 2
    loop.allocate(images, args.prompt_len, args.image_tokens)
    gen = torch.Generator(device="cpu").manual_seed(5)
    prompt = torch.randint(0, loop.s["text_vocab"], (2 * images, args.prompt_len), generator=gen).to(device)
    with torch.inference_mode():
        loop.prefill(prompt, args.cfg, 1.0, 0, greedy=True)
        for _ in range(args.image_tokens - 1):
            loop.step(args.cfg, 1.0, 0, greedy=True)
        cached = loop.generated.clone()
        logits = loop.full_forward_logits(prompt, cached)  # [R, image_tokens, V]
        cond, uncond = logits[0::2], logits[1::2]
        reference = (uncond + args.cfg * (cond - uncond)).argmax(dim=-1)
    same = torch.equal(cached, reference)
    print(f"check: cached greedy tokens {'==' if same else '!='} full-forward greedy tokens "
          f"({images} images x {args.image_tokens} tokens)")
    if not same:
        print("cached   ", cached.tolist())
        print("reference", reference.tolist())
    loop.free()
    return same


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="7b", help="7b, 1b or a comma list (each with its default batches)")
    p.add_argument("--batches", default="", help="images per batch, e.g. 16,64,128 (default: 7b 16,64,128; 1b 64,128,256)")
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--tiny", action="store_true", help="a tiny shape (CPU smoke test)")
    p.add_argument("--check", action="store_true", help="tiny: greedy cached decode against a cache-free forward")
    p.add_argument("--prompt-len", type=int, default=50)
    p.add_argument("--image-tokens", type=int, default=IMAGE_TOKENS)
    p.add_argument("--cfg", type=float, default=5.0)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-k", type=int, default=0)
    p.add_argument("--no-graph", action="store_true", help="eager decode steps (for comparison)")
    p.add_argument("--out", default="", help="append one JSON line per run")
    args = p.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("--device cuda: no CUDA device", file=sys.stderr)
        return 2
    device = torch.device(args.device)
    models = ["tiny"] if args.tiny else args.model.split(",")
    if args.tiny and args.image_tokens == IMAGE_TOKENS:
        args.image_tokens = 16
    if args.tiny and args.prompt_len == 50:
        args.prompt_len = 8
    if args.check and not args.tiny:
        print("--check needs --tiny", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    out = open(args.out, "a") if args.out else None
    print(f"{'model':<5} {'policy':<20} {'images':>6} {'prefill_s':>9} {'decode_s':>9} {'step_ms':>9} {'img/s':>8}"
          f" | capture_s peak_GB")
    all_ok = True
    for name in models:
        if name not in SHAPES:
            print(f"--model: expected 7b or 1b, got {name}", file=sys.stderr)
            return 2
        if args.check:
            ok = check(JanusLoop(SHAPES[name], device, torch.float32, std=0.3), args, device)
            all_ok = all_ok and ok
        if args.batches:
            batches = [int(b) for b in args.batches.split(",")]
        else:
            batches = {"7b": [16, 64, 128], "1b": [64, 128, 256], "tiny": [2, 3]}[name]
        t = time.perf_counter()
        loop = JanusLoop(SHAPES[name], device, torch.bfloat16)
        setup_s = time.perf_counter() - t
        params = sum(w.numel() for layer in loop.layers for w in layer.values())
        print(f"# {name}: {params / 1e9:.2f} G decoder-layer params (bf16), random weights in {setup_s:.1f} s, "
              f"prompt {args.prompt_len}, image tokens {args.image_tokens}, CFG {args.cfg}, temperature "
              f"{args.temperature}, top-k {args.top_k}, graph {'off' if args.no_graph or device.type != 'cuda' else 'on'}")
        for images in batches:
            try:
                r = run_batch(loop, images, args, device)
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
