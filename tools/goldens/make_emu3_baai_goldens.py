#!/usr/bin/env python3
"""The Emu3 goldens from BAAI's own modeling code (github.com/baaivision/Emu3: emu3/mllm/modeling_emu3.py
Emu3ForCausalLM, emu3/tokenizer/modeling_emu3visionvq.py Emu3VisionVQModel), beside transformers' ones
(tools/goldens/make_emu3_goldens.py), on the same committed tiny checkpoint in BAAI's layout
(tests/goldens/tiny/tiny-emu3-gen) and the same inputs (emu3-goldens/goldens.json):

  tests/goldens/tiny/emu3-goldens/baai_logits.f32   the cond / uncond sequences' logits, rows as logits.f32
                                                     (prefill rows at every prompt position, then one row per
                                                     decode step through BAAI's KV cache)
  tests/goldens/tiny/emu3-goldens/baai_pixels.f32   Emu3VisionVQModel.decode(codes) of the 3 x 5 grid: frame 0
  tests/goldens/tiny/emu3-goldens/baai_goldens.json which code made them (repository commit, transformers
                                                     version) and how far they are from transformers' goldens

The tokenizer ids are not repeated here: BAAI's Emu3Tokenizer is tiktoken with Qwen's pattern, which
make_emu3_goldens.py already runs, and it hard-codes the first special id 151,643, which the tiny vocabulary
cannot have.

Runs where a developer has network once (the tests read only the committed files):
  git clone https://github.com/baaivision/Emu3 /tmp/Emu3            # the commit is recorded
  python3 -m pip install --target /tmp/tf444 transformers==4.44.2 tokenizers==0.19.1 huggingface-hub==0.24.6
  PYTHONPATH=/tmp/tf444 /work/main/.venv/bin/python tools/goldens/make_emu3_baai_goldens.py --emu3-repo /tmp/Emu3
(BAAI's code imports transformers 4.44-era modules that transformers 5 removed; torch from the venv.)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
BAAI_DIR = ROOT / "tests/goldens/tiny/tiny-emu3-gen"
GOLDEN_DIR = ROOT / "tests/goldens/tiny/emu3-goldens"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--emu3-repo", type=Path, required=True, help="a clone of github.com/baaivision/Emu3")
    ap.add_argument("--commit", default="", help="its commit, where --emu3-repo is an export rather than a clone")
    args = ap.parse_args()
    sys.path.insert(0, str(args.emu3_repo))
    import transformers
    from emu3.mllm.modeling_emu3 import Emu3ForCausalLM
    from emu3.tokenizer.modeling_emu3visionvq import Emu3VisionVQModel

    commit = args.commit or subprocess.run(["git", "-C", str(args.emu3_repo), "rev-parse", "HEAD"],
                                           capture_output=True, text=True).stdout.strip() or "unknown"
    golden = json.loads((GOLDEN_DIR / "goldens.json").read_text())
    torch.manual_seed(0)

    # --- the decoder: the same sequences as transformers' goldens, prefill then KV decode -----------------
    model = Emu3ForCausalLM.from_pretrained(BAAI_DIR, torch_dtype=torch.float32, attn_implementation="eager").eval()
    rows = []
    for key in ("cond", "uncond"):
        seq = golden["sequences"][key]
        ids, prefill = seq["ids"], seq["prefill"]
        with torch.no_grad():
            out = model(input_ids=torch.tensor([ids[:prefill]]), use_cache=True)
            block, cache = [out.logits[0]], out.past_key_values
            for tok in ids[prefill:]:
                o = model(input_ids=torch.tensor([[tok]]), past_key_values=cache, use_cache=True)
                block.append(o.logits[0])
                cache = o.past_key_values
            full = model(input_ids=torch.tensor([ids])).logits[0]
        stacked = torch.cat(block, 0)
        assert torch.allclose(stacked, full, atol=1e-4, rtol=1e-4), key
        assert stacked.shape[0] == seq["rows"], (key, stacked.shape)
        rows.append(stacked)
    logits = torch.cat(rows, 0).float().numpy()
    logits.astype("<f4").tofile(GOLDEN_DIR / "baai_logits.f32")
    hf_logits = np.fromfile(GOLDEN_DIR / golden["logits_file"], dtype="<f4").reshape(logits.shape)

    # --- the vision decoder: frame 0 of the golden grid ---------------------------------------------------
    vq, info = Emu3VisionVQModel.from_pretrained(BAAI_DIR / "vision_tokenizer", torch_dtype=torch.float32,
                                                 output_loading_info=True)
    vq.eval()
    # Only the encoder (never read when generating) may be absent from the committed file.
    missing = [k for k in info["missing_keys"] if not k.startswith(("encoder.", "quant_conv."))]
    assert not missing and not info["unexpected_keys"], (missing, info["unexpected_keys"])
    px = golden["pixels"]
    codes = torch.tensor(px["codes"]).reshape(1, px["height"], px["width"])
    with torch.no_grad():
        pixels = vq.decode(codes)[0]  # an image grid: frame 0 of the decoded video
    pixels = pixels.float().numpy()
    pixels.astype("<f4").tofile(GOLDEN_DIR / "baai_pixels.f32")
    hf_pixels = np.fromfile(GOLDEN_DIR / px["file"], dtype="<f4").reshape(pixels.shape)

    def rel(a, b):
        return float(np.linalg.norm(a - b) / np.linalg.norm(b))

    record = {
        "generator": "tools/goldens/make_emu3_baai_goldens.py",
        "reference": f"baaivision/Emu3 {commit}: emu3/mllm/modeling_emu3.py Emu3ForCausalLM (eager attention) and "
                     f"emu3/tokenizer/modeling_emu3visionvq.py Emu3VisionVQModel, transformers "
                     f"{transformers.__version__}, torch {torch.__version__}, float32",
        "checkpoint": "tests/goldens/tiny/tiny-emu3-gen (BAAI's layout)",
        "inputs": "goldens.json: sequences (cond, uncond) and pixels.codes",
        "logits_file": "baai_logits.f32",
        "pixels_file": "baai_pixels.f32",
        "against_transformers": {"logits_relative_l2": rel(logits, hf_logits),
                                 "logits_max_abs": float(np.abs(logits - hf_logits).max()),
                                 "pixels_relative_l2": rel(pixels, hf_pixels),
                                 "pixels_max_abs": float(np.abs(pixels - hf_pixels).max())},
    }
    (GOLDEN_DIR / "baai_goldens.json").write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record["against_transformers"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
