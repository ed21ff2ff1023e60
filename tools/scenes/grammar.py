"""Caption grammar over the scene vocabulary, in GenEval's six categories.

A *spec* says what a caption promises: {"tag": category, "objects": [{"shape", "color"|None}],
"relation": [rel, i] or None} where relation means objects[1] is `rel` objects[0]
(GenEval's convention: the second include item is positioned relative to the first).
Counting specs hold one object entry and "count".

Benchmark prompts (tools/sweep/benchmark_prompts.jsonl) use the template
"a photo of {X}"; training captions avoid them (see `HoldOut`).
"""

from __future__ import annotations

import itertools
import json
from typing import Iterable

import numpy as np

from tools.scenes.vocab import COLOR_NAMES, COUNT_WORDS, RELATIONS, SHAPES, plural

CATEGORIES = ("single_object", "two_object", "counting", "colors", "position", "color_attr")
BENCH_TEMPLATE = "a photo of {}"
TRAIN_TEMPLATES = ("a photo of {}", "a picture of {}", "an image of {}", "{}")
TRAIN_CATEGORY_WEIGHTS = {"single_object": 0.08, "colors": 0.12, "two_object": 0.15,
                          "counting": 0.2, "position": 0.2, "color_attr": 0.25}


def article(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def noun_phrase(obj: dict) -> str:
    words = ([obj["color"]] if obj.get("color") else []) + [obj["shape"]]
    return f"{article(words[0])} {' '.join(words)}"


def describe(spec: dict) -> str:
    """The content part X of a caption."""
    objs = spec["objects"]
    tag = spec["tag"]
    if tag == "counting":
        o = objs[0]
        noun = plural(o["shape"]) if spec["count"] > 1 else o["shape"]
        words = [COUNT_WORDS[spec["count"]]] + ([o["color"]] if o.get("color") else []) + [noun]
        return " ".join(words)
    if tag in ("single_object", "colors"):
        return noun_phrase(objs[0])
    if tag in ("two_object", "color_attr"):
        return f"{noun_phrase(objs[0])} and {noun_phrase(objs[1])}"
    if tag == "position":
        rel = spec["relation"][0]
        # objects[1] is `rel` objects[0]: "a B left of a A".
        return f"{noun_phrase(objs[1])} {rel} {noun_phrase(objs[0])}"
    raise ValueError(f"grammar: unknown tag '{tag}'")


def caption(spec: dict, template: str = BENCH_TEMPLATE) -> str:
    return template.format(describe(spec))


def content_key(spec: dict):
    """Order-free content identity used to hold color_attr combinations out of training."""
    if spec["tag"] != "color_attr":
        return None
    pair = sorted((o["color"], o["shape"]) for o in spec["objects"])
    return ("color_attr",) + tuple(itertools.chain.from_iterable(pair))


# --- GenEval-style metadata ------------------------------------------------------------

def geneval_metadata(spec: dict) -> dict:
    """GenEval's evaluation_metadata.jsonl shape: tag, include (+ exclude for counting), prompt."""
    tag = spec["tag"]
    objs = spec["objects"]
    meta = {"tag": tag, "prompt": caption(spec)}
    if tag == "counting":
        o = objs[0]
        inc = {"class": o["shape"], "count": spec["count"]}
        if o.get("color"):
            inc["color"] = o["color"]
        meta["include"] = [inc]
        meta["exclude"] = [{"class": o["shape"], "count": spec["count"] + 1}]
        return meta
    include = []
    for k, o in enumerate(objs):
        item = {"class": o["shape"], "count": 1}
        if o.get("color"):
            item["color"] = o["color"]
        if k == 1 and spec.get("relation"):
            item["position"] = [spec["relation"][0], 0]
        include.append(item)
    meta["include"] = include
    return meta


def spec_from_metadata(meta: dict) -> dict:
    """Inverse of geneval_metadata (used to render ground-truth scenes for a prompt)."""
    tag = meta["tag"]
    inc = meta["include"]
    if tag == "counting":
        return {"tag": tag, "objects": [{"shape": inc[0]["class"], "color": inc[0].get("color")}],
                "count": inc[0]["count"], "relation": None}
    objs = [{"shape": i["class"], "color": i.get("color")} for i in inc]
    rel = None
    if len(inc) > 1 and "position" in inc[1]:
        rel = [inc[1]["position"][0], inc[1]["position"][1]]
    return {"tag": tag, "objects": objs, "relation": rel}


# --- benchmark ---------------------------------------------------------------------------

def benchmark_specs(seed: int = 2026, n_color_attr: int = 300) -> list[dict]:
    """The held-out benchmark: every single_object, colors, two_object (ordered), counting and
    position prompt, plus n_color_attr sampled color_attr prompts (522 by default)."""
    rng = np.random.default_rng(seed)
    specs = []
    for s in SHAPES:
        specs.append({"tag": "single_object", "objects": [{"shape": s, "color": None}], "relation": None})
    for s, c in itertools.product(SHAPES, COLOR_NAMES):
        specs.append({"tag": "colors", "objects": [{"shape": s, "color": c}], "relation": None})
    for a, b in itertools.permutations(SHAPES, 2):
        specs.append({"tag": "two_object", "objects": [{"shape": a, "color": None}, {"shape": b, "color": None}],
                      "relation": None})
    for s, n in itertools.product(SHAPES, (2, 3, 4)):
        specs.append({"tag": "counting", "objects": [{"shape": s, "color": None}], "count": n, "relation": None})
    for (a, b), rel in itertools.product(itertools.permutations(SHAPES, 2), RELATIONS):
        specs.append({"tag": "position", "objects": [{"shape": a, "color": None}, {"shape": b, "color": None}],
                      "relation": [rel, 0]})
    combos = [(sa, ca, sb, cb) for sa, sb in itertools.permutations(SHAPES, 2)
              for ca, cb in itertools.permutations(COLOR_NAMES, 2)]
    seen = set()
    for idx in rng.permutation(len(combos)):
        sa, ca, sb, cb = combos[idx]
        spec = {"tag": "color_attr", "objects": [{"shape": sa, "color": ca}, {"shape": sb, "color": cb}],
                "relation": None}
        key = content_key(spec)
        if key in seen:
            continue
        seen.add(key)
        specs.append(spec)
        if len(seen) == n_color_attr:
            break
    return specs


class HoldOut:
    """Rejects training captions equal to a benchmark prompt, and color_attr contents of the benchmark."""

    def __init__(self, metadata: Iterable[dict]):
        self.prompts = set()
        self.keys = set()
        for meta in metadata:
            self.prompts.add(meta["prompt"])
            key = content_key(spec_from_metadata(meta))
            if key is not None:
                self.keys.add(key)

    @classmethod
    def from_jsonl(cls, path: str) -> "HoldOut":
        with open(path, encoding="utf-8") as f:
            return cls(json.loads(line) for line in f if line.strip())

    def allows(self, spec: dict, text: str) -> bool:
        if text in self.prompts:
            return False
        key = content_key(spec)
        # Counting/colored variants of other categories could share a key only for color_attr.
        if key is not None and key in self.keys:
            return False
        return True


# --- training sampler --------------------------------------------------------------------

def _pick(rng, seq):
    return seq[int(rng.integers(len(seq)))]


def sample_training_spec(rng: np.random.Generator) -> dict:
    tags = list(TRAIN_CATEGORY_WEIGHTS)
    p = np.array([TRAIN_CATEGORY_WEIGHTS[t] for t in tags])
    tag = tags[int(rng.choice(len(tags), p=p / p.sum()))]
    if tag == "single_object":
        return {"tag": tag, "objects": [{"shape": _pick(rng, SHAPES), "color": None}], "relation": None}
    if tag == "colors":
        return {"tag": tag, "objects": [{"shape": _pick(rng, SHAPES), "color": _pick(rng, COLOR_NAMES)}],
                "relation": None}
    if tag == "counting":
        color = _pick(rng, COLOR_NAMES) if rng.random() < 0.3 else None
        return {"tag": tag, "objects": [{"shape": _pick(rng, SHAPES), "color": color}],
                "count": int(rng.integers(1, 5)), "relation": None}
    a, b = (SHAPES[i] for i in rng.choice(len(SHAPES), size=2, replace=False))
    if tag == "two_object":
        return {"tag": tag, "objects": [{"shape": a, "color": None}, {"shape": b, "color": None}], "relation": None}
    if tag == "color_attr":
        ca, cb = (COLOR_NAMES[i] for i in rng.choice(len(COLOR_NAMES), size=2, replace=False))
        return {"tag": tag, "objects": [{"shape": a, "color": ca}, {"shape": b, "color": cb}], "relation": None}
    colored = rng.random() < 0.4
    ca, cb = ((COLOR_NAMES[i] for i in rng.choice(len(COLOR_NAMES), size=2, replace=False)) if colored
              else (None, None))
    return {"tag": "position", "objects": [{"shape": a, "color": ca}, {"shape": b, "color": cb}],
            "relation": [_pick(rng, RELATIONS), 0]}


def sample_training_caption(rng: np.random.Generator, holdout: HoldOut | None):
    """(spec, caption text) with the caption outside the benchmark."""
    while True:
        spec = sample_training_spec(rng)
        text = caption(spec, _pick(rng, TRAIN_TEMPLATES))
        if holdout is None or holdout.allows(spec, text):
            return spec, text
