"""Caption tokenizer (byte-level BPE, HF tokenizers) with the Janus special tokens, and the
Janus-Pro generation prompt.

The prompt is what deepseek-ai/Janus generation_inference.py builds: the "deepseek" conversation
template with an empty system prompt gives "<|User|>: {caption}\\n\\n<|Assistant|>:", the script
appends the image start tag, and the tokenizer's post-processor prepends the BOS token.
The unconditional (CFG) row replaces every prompt token but the first and last by the pad token.

A model may be trained with a system prompt (the same template's non-empty case: "{system}\\n\\n"
before the user turn); its config.json then names it under "argen_system_prompt", and the engine
(engine/families/janus/janus_chat_prompt.h) and `load_prompt_encoder` build the same prompt from it.
"""

from __future__ import annotations

import json
import os

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

BOS = "<｜begin▁of▁sentence｜>"
EOS = "<｜end▁of▁sentence｜>"
PAD = "<｜▁pad▁｜>"
USER = "<|User|>"
ASSISTANT = "<|Assistant|>"
BEGIN_IMAGE = "<begin_of_image>"
END_IMAGE = "<end_of_image>"
SPECIAL_TOKENS = [BOS, EOS, PAD, USER, ASSISTANT, BEGIN_IMAGE, END_IMAGE]

# Janus' VLChatProcessor system prompt (the official generation script passes "" instead).
JANUS_SYSTEM_PROMPT = ("You are a helpful language and vision assistant. You are able to understand the visual "
                       "content that the user provides, and assist the user with a variety of tasks using natural "
                       "language.")
SYSTEM_PROMPT_KEY = "argen_system_prompt"  # config.json extension key (docs/checkpoint-format.md)


def prompt_text(caption: str, system_prompt: str = "") -> str:
    """The generation prompt without BOS (the post-processor adds it). The "deepseek" template
    puts a non-empty system prompt first, followed by the separator "\\n\\n"."""
    head = f"{system_prompt}\n\n" if system_prompt else ""
    return f"{head}{USER}: {caption}\n\n{ASSISTANT}:{BEGIN_IMAGE}"


def train_tokenizer(captions, vocab_size: int = 512, system_prompt: str = "") -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator((prompt_text(c, system_prompt) for c in captions), trainer=trainer)
    bos_id = tok.token_to_id(BOS)
    tok.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B",
                                                       special_tokens=[(BOS, bos_id)])
    return tok


class PromptEncoder:
    """Caption -> prompt ids (BOS ... <begin_of_image>) and the matching unconditional ids."""

    def __init__(self, tok: Tokenizer, system_prompt: str = ""):
        self.tok = tok
        self.system_prompt = system_prompt
        self.pad_id = tok.token_to_id(PAD)
        self.bos_id = tok.token_to_id(BOS)
        self.boi_id = tok.token_to_id(BEGIN_IMAGE)
        if None in (self.pad_id, self.bos_id, self.boi_id):
            raise ValueError("tokenizer.json lacks a Janus special token (pad, BOS or <begin_of_image>)")

    def encode(self, caption: str) -> list[int]:
        ids = self.tok.encode(prompt_text(caption, self.system_prompt)).ids
        if ids[0] != self.bos_id or ids[-1] != self.boi_id:
            raise ValueError(f"prompt for '{caption}' does not run from BOS to <begin_of_image>: {ids}")
        return ids

    def unconditional(self, ids: list[int]) -> list[int]:
        return [ids[0]] + [self.pad_id] * (len(ids) - 2) + [ids[-1]]


def load_prompt_encoder(model_dir: str) -> PromptEncoder:
    """The encoder a model folder was trained with: its tokenizer.json and config.json's system prompt."""
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        system_prompt = json.load(f).get(SYSTEM_PROMPT_KEY, "")
    if not isinstance(system_prompt, str):
        raise ValueError(f"{model_dir}/config.json: field '{SYSTEM_PROMPT_KEY}' must be a string")
    return PromptEncoder(Tokenizer.from_file(os.path.join(model_dir, "tokenizer.json")), system_prompt)
