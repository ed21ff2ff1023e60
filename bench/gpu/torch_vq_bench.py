#!/usr/bin/env python3
"""The VQ-16 decoder in PyTorch with cuDNN: the same-run baseline of argen_vq_bench.

tools/janus_torch/vq16.py's decoder (the official architecture and state-dict
names) with random weights, timed as argen_vq_bench times CudaVqDecoder::Decode:
token grids on the host -> decode_code -> the official uint8 conversion ->
pixels on the host, median wall time of --runs calls after a warm-up, with
torch.backends.cudnn.benchmark on. Precisions: fp32, tf32 (cuDNN and matmul
TF32), bf16 (the model in bf16, NCHW as Janus runs it) and bf16-cl (bf16 and
channels_last).

  python3 bench/gpu/torch_vq_bench.py --batches 1,16,64 --precisions fp32,tf32,bf16,bf16-cl
  python3 bench/gpu/torch_vq_bench.py --device cpu --tiny     # CPU smoke test

Prints `torch-<precision> <batch> <median s> <images/s> <ms/image>` lines.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

try:
    import torch
except ImportError:
    print("torch is not installed", file=sys.stderr)
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from tools.janus_torch.vq16 import VQModel, to_uint8  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batches", default="1,16,64")
    p.add_argument("--precisions", default="fp32,tf32,bf16,bf16-cl")
    p.add_argument("--image-size", type=int, default=384)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    p.add_argument("--tiny", action="store_true", help="ch 32, ch_mult 1,2, 32 px (CPU smoke test)")
    args = p.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("--device cuda: no CUDA device", file=sys.stderr)
        return 2
    dev = torch.device(args.device)
    cfg = dict(ch=32, ch_mult=(1, 2), z_channels=32, codebook_size=64) if args.tiny else {}
    size = 32 if args.tiny else args.image_size
    torch.manual_seed(0)
    base = VQModel(**cfg).eval()
    grid = size // base.downsample
    torch.backends.cudnn.benchmark = True
    print(f"# VQ-16 decoder (PyTorch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}), {size} px, "
          f"{grid}x{grid} tokens, random weights")
    print(f"{'backend':<14} {'batch':>6} {'median s':>12} {'images/s':>12} {'ms/image':>12}")
    for precision in args.precisions.split(","):
        if precision not in ("fp32", "tf32", "bf16", "bf16-cl"):
            print(f"--precisions: unknown {precision}", file=sys.stderr)
            return 2
        tf32 = precision == "tf32"
        torch.backends.cuda.matmul.allow_tf32 = tf32
        torch.backends.cudnn.allow_tf32 = tf32
        dtype = torch.bfloat16 if precision.startswith("bf16") else torch.float32
        model = VQModel(**cfg).eval()
        model.load_state_dict(base.state_dict())
        model = model.to(device=dev, dtype=dtype)
        if precision == "bf16-cl":
            model = model.to(memory_format=torch.channels_last)
        for batch in [int(b) for b in args.batches.split(",")]:
            tokens = torch.randint(0, base.codebook_size, (batch, grid, grid), generator=torch.Generator().manual_seed(1))

            def decode():
                images = model.decode_code(tokens.to(dev, non_blocking=False))
                return to_uint8(images).cpu()  # the host copy synchronises

            times = []
            with torch.inference_mode():
                decode()  # warm-up (cuDNN benchmark picks its algorithms here)
                for _ in range(max(1, args.runs)):
                    t = time.perf_counter()
                    decode()
                    times.append(time.perf_counter() - t)
            med = statistics.median(times)
            print(f"{'torch-' + precision:<14} {batch:>6} {med:>12.4f} {batch / med:>12.1f} {1e3 * med / batch:>12.3f}",
                  flush=True)
        del model
        if dev.type == "cuda":
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
