"""Rich captions: a scene's short caption followed by every object fully specified (size, fill,
colour, shape, position in a 3 x 3 grid) and the background kind, e.g.

  "a photo of a circle and a square: a large striped red circle at the top left,
   a small solid blue square at the bottom right, on a plain background"

(one line). They are the testbed's "the prompt carries what a token needs" lever (docs/model.md,
"Testbed candidates"): with them the attributes the short caption leaves open are in the prompt
instead of only in the image tokens already drawn.
"""

from __future__ import annotations

import itertools

from tools.scenes.grammar import HoldOut, article, content_key

# Object widths span 38-120 px (tools/scenes/layout.py SIZE_RANGE); thirds of that range.
SIZE_EDGES = ((66.0, "small"), (93.0, "medium"))
ROWS = ("top", "middle", "bottom")
COLUMNS = ("left", "center", "right")
BACKGROUNDS = {"plain": "plain", "gradient": "gradient", "texture": "textured"}


def size_word(bbox) -> str:
    width = bbox[2] - bbox[0]
    for edge, word in SIZE_EDGES:
        if width < edge:
            return word
    return "large"


def position_words(bbox, image_size: int = 192) -> str:
    """The 3 x 3 cell of the box centre: "top left", "top", "left", "center", "bottom right", ..."""
    cx, cy = (bbox[0] + bbox[2]) / 2, (bbox[1] + bbox[3]) / 2
    row = ROWS[min(int(3 * cy / image_size), 2)]
    col = COLUMNS[min(int(3 * cx / image_size), 2)]
    if row == "middle":
        return col
    return row if col == "center" else f"{row} {col}"


def object_phrase(obj: dict) -> str:
    words = [size_word(obj["bbox"]), obj.get("pattern", "solid"), obj["color"], obj["shape"]]
    return f"{article(words[0])} {' '.join(words)} at the {position_words(obj['bbox'])}"


def rich_caption(short: str, scene: dict) -> str:
    objects = ", ".join(object_phrase(o) for o in scene["objects"])
    return f"{short}: {objects}, on a {BACKGROUNDS[scene['background']['kind']]} background"


def holdout_allows_scene(scene: dict, holdout: HoldOut | None) -> bool:
    """A rich caption names every object's colour, so it must not name a held-out benchmark
    color_attr pair (two differently shaped objects with their colours, in either order)."""
    if holdout is None:
        return True
    for a, b in itertools.combinations(scene["objects"], 2):
        if a["shape"] == b["shape"]:
            continue
        spec = {"tag": "color_attr", "objects": [{"shape": a["shape"], "color": a["color"]},
                                                 {"shape": b["shape"], "color": b["color"]}]}
        if content_key(spec) in holdout.keys:
            return False
    return True
