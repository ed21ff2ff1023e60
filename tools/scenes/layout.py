"""Turns a caption spec into a concrete scene: object sizes, positions, colors, patterns, background.

Deterministic per seed. Objects never overlap and keep a gap, so each is one
connected region; sizes span 5-15 token rows of the 24x24 grid.
"""

from __future__ import annotations

import colorsys

import numpy as np

from tools.scenes.relations import relations
from tools.scenes.vocab import COLOR_NAMES, IMAGE_SIZE, PATTERNS

MARGIN = 6     # px from the border
GAP = 10       # px between object boxes
SIZE_RANGE = {1: (64, 120), 2: (48, 88), 3: (42, 70), 4: (38, 60)}
PATTERN_P = (0.6, 0.2, 0.2)


def _pale(rng) -> tuple:
    h = rng.random()
    s = rng.uniform(0.0, 0.12)
    v = rng.uniform(0.86, 1.0)
    return tuple(int(round(255 * c)) for c in colorsys.hsv_to_rgb(h, s, v))


def sample_background(rng) -> dict:
    kind = ("plain", "gradient", "texture")[int(rng.integers(3))]
    bg = {"kind": kind, "color": _pale(rng)}
    if kind == "gradient":
        bg["color2"] = _pale(rng)
        bg["vertical"] = bool(rng.random() < 0.5)
    elif kind == "texture":
        bg["cells"] = int(rng.integers(6, 20))
        bg["amplitude"] = float(rng.uniform(5.0, 12.0))
    return bg


def _boxes_apart(a, b) -> bool:
    return a[2] + GAP <= b[0] or b[2] + GAP <= a[0] or a[3] + GAP <= b[1] or b[3] + GAP <= a[1]


def _random_box(rng, size_range, size=IMAGE_SIZE):
    w = float(rng.uniform(*size_range))
    h = w * float(rng.uniform(0.9, 1.1))
    x0 = float(rng.uniform(MARGIN, size - MARGIN - w))
    y0 = float(rng.uniform(MARGIN, size - MARGIN - h))
    return [round(x0, 1), round(y0, 1), round(x0 + w, 1), round(y0 + h, 1)]


def _relation_clear(box_b, box_a, rel) -> bool:
    """box_b is `rel` box_a, and clearly so: along-axis offset at least twice the across one."""
    if rel not in relations(box_b, box_a) or len(relations(box_b, box_a)) != 1:
        return False
    dx = (box_b[0] + box_b[2] - box_a[0] - box_a[2]) / 2
    dy = (box_b[1] + box_b[3] - box_a[1] - box_a[3]) / 2
    along, across = (abs(dx), abs(dy)) if rel in ("left of", "right of") else (abs(dy), abs(dx))
    return along >= 2 * across


def place(rng, n: int, relation=None) -> list:
    lo, hi = SIZE_RANGE[n]
    for attempt in range(2000):
        shrink = 0.97 ** (attempt // 100)
        boxes = []
        for _ in range(n):
            box = _random_box(rng, (lo * shrink, hi * shrink))
            if all(_boxes_apart(box, b) for b in boxes):
                boxes.append(box)
            else:
                break
        if len(boxes) != n:
            continue
        if relation is not None and not _relation_clear(boxes[1], boxes[0], relation):
            continue
        return boxes
    raise RuntimeError(f"layout: could not place {n} objects (relation {relation})")


def scene_from_spec(spec: dict, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    if spec["tag"] == "counting":
        base = spec["objects"][0]
        n = spec["count"]
        shared = base.get("color") or (COLOR_NAMES[int(rng.integers(len(COLOR_NAMES)))]
                                       if rng.random() < 0.5 else None)
        wanted = [{"shape": base["shape"], "color": shared} for _ in range(n)]
    else:
        wanted = [dict(o) for o in spec["objects"]]
    rel = spec["relation"][0] if spec.get("relation") else None
    boxes = place(rng, len(wanted), rel)
    objects = []
    for o, box in zip(wanted, boxes):
        color = o.get("color") or COLOR_NAMES[int(rng.integers(len(COLOR_NAMES)))]
        pattern = PATTERNS[int(rng.choice(len(PATTERNS), p=PATTERN_P))]
        objects.append({"shape": o["shape"], "color": color, "pattern": pattern,
                        "pattern_phase": round(float(rng.random()), 3), "bbox": box})
    return {"seed": int(seed), "background": sample_background(rng), "objects": objects}
