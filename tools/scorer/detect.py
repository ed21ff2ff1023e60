"""Finds the objects of a shape scene: saturation segmentation, connected components,
majority palette color, and shape from three scale-free features.

Backgrounds are pale (saturation <= 0.12) and object colors saturated, so a
saturation threshold separates them; objects keep a gap, so each component is one object.
"""

from __future__ import annotations

import numpy as np

from tools.scenes.vocab import COLORS, IMAGE_SIZE
from tools.scorer.components import boundary_corners, convex_hull_area, label_components

SATURATION_MIN = 0.4
VALUE_MIN = 40
MIN_AREA_AT_192 = 120  # px; smaller blobs are noise, not objects

_PALETTE_NAMES = list(COLORS)
_PALETTE = np.array([COLORS[c] for c in _PALETTE_NAMES], dtype=np.float32)

# (extent = area / bbox area, solidity = area / convex hull area, centroid offset below the
# bbox center in box heights), measured on renders of tools/scenes/render.py.
SHAPE_PROTOTYPES = {
    "circle": (0.78, 0.98, 0.0),
    "square": (1.00, 1.00, 0.0),
    "triangle": (0.51, 0.98, 0.165),
    "diamond": (0.51, 0.98, 0.0),
    "star": (0.37, 0.53, 0.058),
    "cross": (0.57, 0.735, 0.0),
}
FEATURE_WEIGHTS = np.array([1.0, 1.0, 2.0])
_SHAPE_NAMES = list(SHAPE_PROTOTYPES)
_SHAPE_MATRIX = np.array([SHAPE_PROTOTYPES[s] for s in _SHAPE_NAMES])


def foreground_mask(image: np.ndarray) -> np.ndarray:
    img = image.astype(np.float32)
    mx, mn = img.max(axis=2), img.min(axis=2)
    sat = (mx - mn) / np.maximum(mx, 1.0)
    return (sat > SATURATION_MIN) & (mx > VALUE_MIN)


def classify_color(pixels: np.ndarray) -> str:
    """Majority vote of nearest palette colors over (n, 3) pixels."""
    d = ((pixels[:, None, :].astype(np.float32) - _PALETTE[None, :, :]) ** 2).sum(axis=2)
    votes = np.bincount(d.argmin(axis=1), minlength=len(_PALETTE_NAMES))
    return _PALETTE_NAMES[int(votes.argmax())]


def shape_features(comp: np.ndarray) -> tuple[float, float, float]:
    ys, xs = np.nonzero(comp)
    area = float(len(xs))
    bw = xs.max() - xs.min() + 1
    bh = ys.max() - ys.min() + 1
    hull = convex_hull_area(boundary_corners(comp))
    extent = area / float(bw * bh)
    solidity = area / hull if hull > 0 else 1.0
    offset = (ys.mean() + 0.5 - ys.min() - bh / 2.0) / bh
    return extent, solidity, float(offset)


def classify_shape(features) -> str:
    d = (((_SHAPE_MATRIX - np.asarray(features)[None, :]) * FEATURE_WEIGHTS) ** 2).sum(axis=1)
    return _SHAPE_NAMES[int(d.argmin())]


def detect(image: np.ndarray) -> list[dict]:
    """uint8 (H, W, 3) -> [{"shape", "color", "bbox": [x0, y0, x1, y1] in pixels, "area", "features"}]."""
    if image.ndim != 3 or image.shape[2] != 3:
        raise ValueError(f"detect: expected an (H, W, 3) image, got shape {image.shape}")
    mask = foreground_mask(image)
    labels, n = label_components(mask)
    min_area = MIN_AREA_AT_192 * (image.shape[0] * image.shape[1]) / float(IMAGE_SIZE * IMAGE_SIZE)
    areas = np.bincount(labels[labels >= 0], minlength=n)  # skip noise without a full-image mask each
    objects = []
    for k in range(n):
        if areas[k] < min_area:
            continue
        comp = labels == k
        area = int(areas[k])
        ys, xs = np.nonzero(comp)
        feats = shape_features(comp)
        objects.append({
            "shape": classify_shape(feats),
            "color": classify_color(image[comp]),
            "bbox": [int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1],
            "area": area,
            "features": [round(f, 3) for f in feats],
        })
    return objects
