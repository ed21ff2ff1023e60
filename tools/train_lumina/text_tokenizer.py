"""The caption tokenizer of the small Lumina-format model: a byte-level BPE trained on the
Lumina-mGPT prompts of the captions, with Chameleon's pre-tokenizer and the reduced Chameleon
special-token layout (tools/lumina_torch/chameleon_vocab.py) at ids 0.., text tokens after them.
Saved as tokenizer.json + tokenizer_config.json (LlamaTokenizerFast, add_bos_token), as the HF
conversion of the Chameleon tokenizer is.
"""

from __future__ import annotations

import json
import os

from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

from tools.lumina_torch.chameleon_vocab import (BEGIN_IMAGE, BOS, END_IMAGE, END_OF_TURN, NEW_LINE, PATCH_PIXELS,
                                                VocabLayout, image_token_name, prompt_text, resolution_token)

CHAMELEON_PRE_TOKENIZER = pre_tokenizers.Sequence([
    pre_tokenizers.Split(Regex("<sentinel:[0-9]+>"), "isolated"),
    pre_tokenizers.Split(Regex("(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z"), "isolated"),
    pre_tokenizers.Split(Regex("([\t\n]|    |  )"), "isolated"),
    pre_tokenizers.Split(Regex("\\p{N}"), "isolated"),
    pre_tokenizers.Split(Regex("[\\p{P}!-/:-@\\[-`{-~]"), "isolated"),
    pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
])

TOKENIZER_CONFIG = {
    "tokenizer_class": "LlamaTokenizerFast", "add_bos_token": True, "add_eos_token": False,
    "bos_token": "<s>", "eos_token": "</s>", "pad_token": "<pad>", "unk_token": "<unk>",
    "legacy": False, "clean_up_tokenization_spaces": False,
}


def train_tokenizer(captions, codebook_size: int, max_units: int, image_size: int, vocab_size: int = 512) -> Tokenizer:
    specials = VocabLayout(codebook_size, max_units).special_tokens()
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = CHAMELEON_PRE_TOKENIZER
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=len(specials) + vocab_size, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator((prompt_text(c, image_size, image_size) for c in captions), trainer=trainer)
    for i, name in enumerate(specials):
        assert tok.token_to_id(name) == i, (name, tok.token_to_id(name))
    return tok


def save(tok: Tokenizer, out_dir: str) -> None:
    os.makedirs(out_dir, exist_ok=True)
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(TOKENIZER_CONFIG, f, indent=1)


class PromptEncoder:
    """Caption + size -> the conditional prompt ids (<s> ... <reserved08706>) and the image header
    (<racm3:break>, height token, width token), which is also the whole unconditional prompt."""

    def __init__(self, tok: Tokenizer):
        self.tok = tok
        ids = {n: tok.token_to_id(n) for n in (BOS, END_OF_TURN, BEGIN_IMAGE, END_IMAGE, NEW_LINE, "<pad>")}
        missing = [n for n, i in ids.items() if i is None]
        if missing:
            raise ValueError(f"tokenizer lacks Lumina special tokens {missing}")
        self.bos, self.eot, self.boi, self.eoi, self.new_line, self.pad = (
            ids[BOS], ids[END_OF_TURN], ids[BEGIN_IMAGE], ids[END_IMAGE], ids[NEW_LINE], ids["<pad>"])
        self.image_offset = tok.token_to_id(image_token_name(0))
        assert self.image_offset is not None

    def encode(self, caption: str, width: int, height: int) -> list[int]:
        ids = [self.bos] + self.tok.encode(prompt_text(caption, width, height), add_special_tokens=False).ids
        assert ids[-1] == self.eot, ids
        return ids

    def header(self, width: int, height: int) -> list[int]:
        h = self.tok.token_to_id(resolution_token(height // PATCH_PIXELS))
        w = self.tok.token_to_id(resolution_token(width // PATCH_PIXELS))
        if h is None or w is None:
            raise ValueError(f"no resolution token for {width}x{height}")
        return [self.boi, h, w]
