"""The closed world of the scenes: shapes, colors, counts, relations.

Colors are saturated and backgrounds are pale, so the scorer can separate
objects from the background by saturation and name colors by nearest palette entry.
"""

SHAPES = ("circle", "square", "triangle", "diamond", "star", "cross")

# name -> sRGB; hues spread around the wheel, brown distinguished by value.
COLORS = {
    "red": (220, 30, 30),
    "orange": (255, 140, 0),
    "yellow": (240, 210, 0),
    "green": (30, 160, 50),
    "blue": (30, 80, 220),
    "purple": (140, 40, 190),
    "pink": (255, 100, 190),
    "brown": (120, 65, 20),
}
COLOR_NAMES = tuple(COLORS)

PATTERNS = ("solid", "striped", "dotted")

COUNT_WORDS = {1: "one", 2: "two", 3: "three", 4: "four"}

RELATIONS = ("left of", "right of", "above", "below")

IMAGE_SIZE = 192


def plural(shape: str) -> str:
    return shape + ("es" if shape.endswith("s") else "s")
