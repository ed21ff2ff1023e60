#!/usr/bin/env python3
"""Emu3's two tokenizer layouts on a real vocabulary (not committed: Emu3-Gen's emu3.tiktoken, or
Qwen's qwen.tiktoken, which has the same 151,643 ranks), against each other and for argen.

Writes OUT_DIR/ with emu3.tiktoken (copied), emu3_vision_tokens.txt (BAAI's lines for 32,768
codes), tokenizer.json (as transformers' convert_emu3_weights_to_hf.py makes it: ByteLevel
pre-tokenizer with GPT-2's regex) and ids.json: every text of tools/sweep/benchmark_prompts.jsonl,
the positive-suffixed captions, the default negative prompt and the size headers "90*90" ...,
with the ids of tiktoken (BAAI's Emu3Tokenizer: Qwen's pattern, specials from 151,643) and of HF
tokenizers on the converted tokenizer.json. Prints how many texts the layouts tokenize differently.

engine/families/emu3/tests/emu3_real_tokenizer_test.cc compares argen's two loaders with ids.json
when ARGEN_EMU3_REAL_TOKENIZER=OUT_DIR (skipped otherwise).

Run: /work/main/.venv/bin/python tools/goldens/check_emu3_real_tokenizer.py TIKTOKEN OUT_DIR
"""

from __future__ import annotations

import base64
import json
import shutil
import sys
from pathlib import Path

import tiktoken
from tokenizers import Tokenizer as HfTokenizer

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_emu3_goldens as g  # noqa: E402


def main() -> int:
    src, out = Path(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    if src.resolve() != (out / "emu3.tiktoken").resolve():
        shutil.copy(src, out / "emu3.tiktoken")
    ranks = {}
    for line in (out / "emu3.tiktoken").read_bytes().splitlines():
        if line:
            t, r = line.split()
            ranks[base64.b64decode(t)] = int(r)
    g.CODEBOOK = 32768
    (out / "emu3_vision_tokens.txt").write_text("\n".join(g.vision_token_lines()) + "\n")
    specials = g.special_tokens(len(ranks))
    (out / "tokenizer.json").write_text(json.dumps(g.hf_tokenizer_json(ranks, specials), ensure_ascii=False))
    tk = tiktoken.Encoding("Emu3", pat_str=g.QWEN_PATTERN, mergeable_ranks=ranks, special_tokens=specials)
    hf = HfTokenizer.from_file(str(out / "tokenizer.json"))
    root = Path(__file__).resolve().parents[2]
    prompts = [json.loads(l)["prompt"] for l in (root / "tools/sweep/benchmark_prompts.jsonl").read_text().splitlines()
               if l.strip()]
    texts = prompts + [p + g.POSITIVE for p in prompts] + [g.NEGATIVE, "90*90", "68*120", "120*68", "45*180"]
    ids = {"texts": texts, "baai": [tk.encode(t, disallowed_special=()) for t in texts],
           "hf": [hf.encode(t, add_special_tokens=False).ids for t in texts],
           "specials": {k: specials[k] for k in ("<|extra_200|>", "<|extra_203|>", "<|image token|>",
                                                 "<|visual token 000000|>")}}
    differ = [t for t, a, b in zip(texts, ids["baai"], ids["hf"]) if a != b]
    ids["differ"] = differ
    (out / "ids.json").write_text(json.dumps(ids, ensure_ascii=False))
    print(f"{len(differ)} of {len(texts)} texts tokenize differently; e.g. {differ[:5]}")
    print("negative prompt:", len(ids["baai"][texts.index(g.NEGATIVE)]), "tokens; 90*90 ->",
          ids["baai"][texts.index("90*90")], "vs", ids["hf"][texts.index("90*90")])
    print("specials:", ids["specials"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
