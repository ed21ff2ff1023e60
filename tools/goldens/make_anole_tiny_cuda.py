#!/usr/bin/env python3
"""The tiny random Anole of make_anole_tiny.py at a shape the CUDA backend runs (head_dim 16: its
attention kernels take head_dim 16, 32, 64 or 128; the committed tiny-anole-* have head_dim 8), in both
layouts, with transformers' goldens, for engine/cuda/tests/anole_cuda_test.cc (and the CPU check of the
same files in engine/families/anole/tests/anole_logits_test.cc):
  tests/goldens/tiny/tiny-anole-cuda-hf/     config.json, model.safetensors, tokenizer.json, goldens.json, logits.f32
  tests/goldens/tiny/tiny-anole-cuda-meta/   models/7b/params.json, models/7b/consolidated.pth
Both read the text tokenizer and the VQGAN from tiny-anole-meta/tokenizer (family option vqgan_dir): the
same vocabulary, so the generator's own tokenizer folder and VQGAN image are dropped here.

Only the shape and the folders differ from make_anole_tiny.py (its generator, run with these module
values): dim 32, 2 heads (head_dim 16), 2 layers, the same seed.

Run: .venv/bin/python tools/goldens/make_anole_tiny_cuda.py
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "goldens"))
import make_anole_tiny as base  # noqa: E402

HF_DIR = ROOT / "tests" / "goldens" / "tiny" / "tiny-anole-cuda-hf"
META_DIR = ROOT / "tests" / "goldens" / "tiny" / "tiny-anole-cuda-meta"


def main() -> None:
    base.DIM, base.HEADS = 32, 2
    base.HEAD_DIM = base.DIM // base.HEADS
    base.HF_DIR, base.META_DIR = HF_DIR, META_DIR
    base.main()
    shutil.rmtree(META_DIR / "tokenizer")
    (META_DIR / "greedy_rgb8").unlink()
    golden_path = HF_DIR / "goldens.json"
    golden = json.loads(golden_path.read_text())
    golden["generator"] = "tools/goldens/make_anole_tiny_cuda.py (make_anole_tiny.py at dim 32, 2 heads)"
    del golden["greedy"]["rgb8_file"]
    golden["greedy"]["note"] = golden["greedy"]["note"].split("; the codes decoded")[0]
    golden["vqgan_dir"] = "../tiny-anole-meta/tokenizer"
    golden_path.write_text(json.dumps(golden, indent=1) + "\n")
    for d in (HF_DIR, META_DIR):
        size = sum(f.stat().st_size for f in d.rglob("*") if f.is_file())
        print(f"{d.relative_to(ROOT)}: {size / 1e3:.0f} kB (final)")


if __name__ == "__main__":
    main()
