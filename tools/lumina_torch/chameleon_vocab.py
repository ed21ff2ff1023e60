"""The Chameleon vocabulary layout, reduced, as argen's small Lumina-format models and goldens use it.

The published vocabulary (65,536 ids) begins <s> <pad> </s> <unk>, then the 8,192 image
tokens IMGIMG<code digits as letters A..J>Z at ids 4..8195 in code order, then <eoss>
(8196), <racm3:break> (8197) and reserved tokens <reservedNNNNN> at id NNNNN + 4 (Lumina-mGPT:
<reserved08706> end of turn = 8710, <reserved08707> renamed <image> = 8711 by HF's converter,
<reserved08799> image new line = 8803, <reserved{8800 + n}> = resolution n x 32 px = 8804 + n).
A reduced layout keeps the names, the order and the image block at id 4; it drops the ids
nobody uses, so the special ids are smaller. Code looks tokens up by name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional

BOS, PAD, EOS, UNK = "<s>", "<pad>", "</s>", "<unk>"
END_IMAGE, BEGIN_IMAGE = "<eoss>", "<racm3:break>"
END_OF_TURN, IMAGE_PLACEHOLDER, NEW_LINE = "<reserved08706>", "<image>", "<reserved08799>"
SEPARATORS = ["<reserved08796>", "<reserved08797>", "<reserved08798>"]  # Lumina-mGPT's (sub-)image separators
PATCH_PIXELS = 32  # one resolution-token unit: 2 x 2 VQGAN codes


def image_token_name(code: int) -> str:
    return "IMGIMG" + "".join(chr(ord("A") + int(d)) for d in str(code)) + "Z"


def resolution_token(units: int) -> str:
    return f"<reserved{8800 + units:05d}>"


def prompt_text(caption: str, width: int, height: int) -> str:
    """Lumina-mGPT's generation request (the human turn) with its end-of-turn token, without BOS."""
    return f"Generate an image of {width}x{height} according to the following prompt:\n{caption}{END_OF_TURN}"


@dataclass
class VocabLayout:
    num_image_tokens: int
    max_resolution_units: int
    text_tokens: int = 0                      # placeholder text tokens "t0".. (goldens); 0 when a tokenizer adds them
    text_names: Optional[List[str]] = None    # or the real text tokens, in id order after the specials
    ids: Dict[str, int] = field(init=False)

    def __post_init__(self):
        names = self.special_tokens()
        if self.text_names is not None:
            names += self.text_names
        else:
            names += [f"t{i}" for i in range(self.text_tokens)]
        self._names = names
        self.ids = {n: i for i, n in enumerate(names)}
        assert len(self.ids) == len(names), "duplicate token names"

    def special_tokens(self) -> List[str]:
        out = [BOS, PAD, EOS, UNK]
        out += [image_token_name(c) for c in range(self.num_image_tokens)]
        out += [END_IMAGE, BEGIN_IMAGE, END_OF_TURN, IMAGE_PLACEHOLDER] + SEPARATORS + [NEW_LINE]
        out += [resolution_token(n) for n in range(1, self.max_resolution_units + 1)]
        return out

    @property
    def vocab_size(self) -> int:
        return len(self._names)

    def vocabulary_map(self) -> Dict[str, int]:
        return dict(self.ids)

    def image_ids(self) -> List[int]:
        return [self.ids[image_token_name(c)] for c in range(self.num_image_tokens)]

    def image_id(self, code: int) -> int:
        return 4 + code

    def text_id(self, i: int) -> int:
        return len(self.special_tokens()) + i

    def resolution_id(self, units: int) -> int:
        return self.ids[resolution_token(units)]
