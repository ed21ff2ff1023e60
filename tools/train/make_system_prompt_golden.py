"""Writes engine/families/janus/tests/system_prompt_golden.json: the training side's prompt ids
(tools/train/text_tokenizer.PromptEncoder, HF tokenizers) with Janus' system prompt, for captions
short and rich, on the shipped model's tokenizer. The engine's prompt with a config.json
argen_system_prompt must give the same ids (janus_chat_prompt_test), so a model trained with a
system prompt is served with exactly the prompt it was trained on.

  .venv/bin/python -m tools.train.make_system_prompt_golden
"""

from __future__ import annotations

import json
import os

from tokenizers import Tokenizer

from tools.train.text_tokenizer import JANUS_SYSTEM_PROMPT, PromptEncoder, prompt_text

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TOKENIZER = "models/argen-scenes-v1/tokenizer.json"
OUT = os.path.join(ROOT, "engine", "families", "janus", "tests", "system_prompt_golden.json")
CAPTIONS = [
    "a photo of a blue triangle and a red square",
    "three stars",
    "a circle and a square: a large striped red circle at the top left, a small solid blue square at the "
    "bottom right, on a plain background",
]


def main():
    enc = PromptEncoder(Tokenizer.from_file(os.path.join(ROOT, TOKENIZER)), JANUS_SYSTEM_PROMPT)
    cases = []
    for caption in CAPTIONS:
        ids = enc.encode(caption)
        cases.append({"caption": caption, "text": prompt_text(caption, JANUS_SYSTEM_PROMPT), "cond": ids,
                      "uncond": enc.unconditional(ids)})
    with open(OUT, "w", encoding="utf-8") as f:
        # One case per line: the id lists stay readable in a diff.
        head = json.dumps({"tokenizer": TOKENIZER, "system_prompt": JANUS_SYSTEM_PROMPT}, ensure_ascii=False)
        rows = ",\n".join(json.dumps(c, ensure_ascii=False) for c in cases)
        f.write(head[:-1] + ', "cases": [\n' + rows + "\n]}\n")
    print(f"wrote {OUT}: {len(cases)} cases, prompt lengths {[len(c['cond']) for c in cases]}")


if __name__ == "__main__":
    main()
