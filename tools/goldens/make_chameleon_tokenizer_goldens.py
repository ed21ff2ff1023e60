#!/usr/bin/env python3
"""Chameleon / Lumina-mGPT tokenizer goldens for engine/tokenizer, from HF `tokenizers`.

The published Chameleon text tokenizer (Meta's text_tokenizer.json, shipped by
Lumina-mGPT as tokenizer.json + tokenizer_config.json) is a byte-level BPE whose
pre-tokenizer is a Sequence of Splits (sentinel tokens, image tokens, tabs /
newlines / runs of two or four spaces, single digits, single punctuation marks)
followed by ByteLevel with the GPT-2 regex; its vocabulary starts with <s>,
<pad>, </s>, <unk>, then the 8192 image tokens IMGIMG<digits as letters>Z,
<eoss>, <racm3:break> and <reservedNNNNN> tokens, all special. docs/lumina-mgpt.md
says where each fact comes from. This script builds a tokenizer of that
structure with a vocabulary reduced to a BPE trained here on a small corpus and
64 image tokens, and writes under tests/goldens/tokenizer/chameleon/:

  tokenizer.json          the tokenizer (as HF tokenizers saves it)
  tokenizer_config.json   LlamaTokenizerFast with add_bos_token (what the HF
                          conversion writes next to it)
  goldens.json            ids with and without the BOS, decoded text, for every
                          test string; Lumina-mGPT generation prompts (the item
                          processor's template: BOS, the human turn, the
                          end-of-turn token <reserved08706>) for a few captions
                          and sizes

Run: .venv/bin/python tools/goldens/make_chameleon_tokenizer_goldens.py
"""
from __future__ import annotations

import json
import pathlib
import sys

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "goldens"))
from make_tokenizer_goldens import CORPUS, TEST_STRINGS  # noqa: E402

OUT = ROOT / "tests" / "goldens" / "tokenizer" / "chameleon"
NUM_IMAGE_TOKENS = 64
END_OF_TURN = "<reserved08706>"
NEW_LINE = "<reserved08799>"


def image_token_name(code: int) -> str:
    """Chameleon's name for VQGAN code `code`: its decimal digits written as letters A..J."""
    return "IMGIMG" + "".join(chr(ord("A") + int(d)) for d in str(code)) + "Z"


def special_tokens() -> list[str]:
    """Ids 0.. in Chameleon's order (reduced): <s> <pad> </s> <unk>, image tokens, <eoss>,
    <racm3:break>, then the reserved tokens Lumina-mGPT uses (end of turn, <image>, the
    separators and new line, resolution tokens <reserved{8800+n}>) and a few sentinels."""
    tokens = ["<s>", "<pad>", "</s>", "<unk>"]
    tokens += [image_token_name(c) for c in range(NUM_IMAGE_TOKENS)]
    tokens += ["<eoss>", "<racm3:break>", END_OF_TURN, "<image>"]
    tokens += [f"<reserved{n:05d}>" for n in (8796, 8797, 8798, 8799)]
    tokens += [f"<reserved{8800 + n:05d}>" for n in range(1, 33)]
    tokens += [f"<sentinel:{i}>" for i in range(4)]
    return tokens


CHAMELEON_PRE_TOKENIZER = pre_tokenizers.Sequence([
    pre_tokenizers.Split(Regex("<sentinel:[0-9]+>"), "isolated"),
    pre_tokenizers.Split(Regex("(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z"), "isolated"),
    pre_tokenizers.Split(Regex("([\t\n]|    |  )"), "isolated"),
    pre_tokenizers.Split(Regex("\\p{N}"), "isolated"),
    pre_tokenizers.Split(Regex("[\\p{P}!-/:-@\\[-`{-~]"), "isolated"),
    pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
])


def lumina_prompt(width: int, height: int, caption: str) -> str:
    """Lumina-mGPT's generation prompt text: the human turn of its Conversation template
    (message + <reserved08706>), no assistant text; the BOS is added at tokenization."""
    return f"Generate an image of {width}x{height} according to the following prompt:\n{caption}" + END_OF_TURN


CHAMELEON_STRINGS = [
    "two  spaces, four    spaces, eight        spaces",
    "tab\tnewline\n\ttab after newline",
    "digits 0123456789 and 2026-11-30",
    "punctuation!?.,;:'\"()[]{}<>@#$%^&*-_=+/\\|~`",
    "IMGIMGAZ IMGIMGBZIMGIMGBAZ",
    "an image token inside textIMGIMGCDZword",
    "IMGIMGJZ is not matched by the image split (no J in its class)",
    "<racm3:break><reserved08812><reserved08812>IMGIMGAZ<reserved08799><eoss>",
    "<s>hello</s><pad><unk>",
    "<sentinel:0> and <sentinel:3> and <sentinel:99>",
    "end of turn<reserved08706>",
    "Generate an image of 384x384 according to the following prompt:\na red cube",
    "Generate an image of 512x1024 according to the following prompt:\nTwo cats.",
    "a photo of three blue stars",
    "a picture of a brown diamond and a blue star",
    "an orange triangle above a red square",
    "  spaces at start and end  ",
    "\n\nnewlines\n\n\n",
    "CamelCase and snake_case and kebab-case",
    "1.5x faster, 3/4 done, 100%",
]

CAPTIONS = [
    ("a photo of a red cube", 384, 384),
    ("an orange triangle above a red square", 384, 384),
    ("Image of a dog playing water, and a water fall is in the background.", 768, 768),
    ("three yellow stars\nand a tab\there", 512, 1024),
    ("  leading and trailing spaces  ", 1024, 512),
]


def build() -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = CHAMELEON_PRE_TOKENIZER
    tok.decoder = decoders.ByteLevel()
    corpus = CORPUS + [lumina_prompt(w, h, c) for c, w, h in CAPTIONS] + CHAMELEON_STRINGS * 5
    trainer = trainers.BpeTrainer(vocab_size=1400, min_frequency=2, special_tokens=special_tokens(),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus, trainer=trainer)
    return tok


def cases(tok: Tokenizer, bos_id: int) -> list:
    out = []
    for text in TEST_STRINGS + CHAMELEON_STRINGS:
        plain = tok.encode(text, add_special_tokens=False).ids
        ids = [bos_id] + plain  # LlamaTokenizerFast with add_bos_token: BOS then the text
        out.append({"text": text, "ids": ids, "ids_no_special": plain,
                    "decoded": tok.decode(ids, skip_special_tokens=False),
                    "decoded_skip_special": tok.decode(ids, skip_special_tokens=True)})
    return out


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    tok = build()
    for i, name in enumerate(special_tokens()):
        assert tok.token_to_id(name) == i, (name, tok.token_to_id(name), i)
    path = OUT / "tokenizer.json"
    tok.save(str(path))
    config = {
        "tokenizer_class": "LlamaTokenizerFast", "add_bos_token": True, "add_eos_token": False,
        "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>",
        "legacy": False, "clean_up_tokenization_spaces": False,
    }
    (OUT / "tokenizer_config.json").write_text(json.dumps(config, indent=1) + "\n")

    reloaded = Tokenizer.from_file(str(path))
    bos = reloaded.token_to_id("<s>")
    prompts = []
    for caption, width, height in CAPTIONS:
        text = lumina_prompt(width, height, caption)
        ids = [bos] + reloaded.encode(text, add_special_tokens=False).ids
        assert ids[-1] == reloaded.token_to_id(END_OF_TURN), ids
        prompts.append({"caption": caption, "width": width, "height": height, "text": text, "ids": ids})
    goldens = {
        "generator": "tools/goldens/make_chameleon_tokenizer_goldens.py",
        "file": "tokenizer.json",
        "special_tokens": special_tokens(),
        "cases": cases(reloaded, bos),
        "prompts": prompts,
    }
    (OUT / "goldens.json").write_text(json.dumps(goldens, ensure_ascii=False, indent=1) + "\n")
    print(f"vocab {reloaded.get_vocab_size()}, {len(goldens['cases'])} strings, {len(prompts)} prompts")
    for p in sorted(OUT.iterdir()):
        print(f"{p.relative_to(ROOT)}: {p.stat().st_size} bytes")


if __name__ == "__main__":
    main()
