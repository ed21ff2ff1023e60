"""Renders a scene dict to an RGB image (PIL), deterministically.

A scene: {"background": {...}, "objects": [{"shape", "color", "pattern", "bbox": [x0, y0, x1, y1]}]}.
Objects are drawn supersampled (2x) for clean edges; pattern shades are darker
tints of the object's color and cover a minority of its area, so the object's
dominant color stays its named color.
"""

from __future__ import annotations

import math

import numpy as np
from PIL import Image, ImageDraw

from tools.scenes.vocab import COLORS, IMAGE_SIZE

SUPERSAMPLE = 2
PATTERN_SHADE = 0.72  # pattern color = object color * this


def shape_polygon(shape: str, bbox):
    """Polygon vertices (or None for a circle) filling bbox = (x0, y0, x1, y1)."""
    x0, y0, x1, y1 = bbox
    cx, cy, w, h = (x0 + x1) / 2, (y0 + y1) / 2, x1 - x0, y1 - y0
    if shape == "square":
        return [(x0, y0), (x1, y0), (x1, y1), (x0, y1)]
    if shape == "triangle":
        return [(cx, y0), (x1, y1), (x0, y1)]
    if shape == "diamond":
        return [(cx, y0), (x1, cy), (cx, y1), (x0, cy)]
    if shape == "star":
        pts = []
        for k in range(10):
            r = 0.5 if k % 2 == 0 else 0.21
            a = -math.pi / 2 + k * math.pi / 5
            pts.append((cx + r * w * math.cos(a), cy + r * h * math.sin(a) * 1.05 + 0.03 * h))
        return pts
    if shape == "cross":
        t = 1.0 / 3.0
        ax0, ax1 = x0 + t * w, x1 - t * w
        ay0, ay1 = y0 + t * h, y1 - t * h
        return [(ax0, y0), (ax1, y0), (ax1, ay0), (x1, ay0), (x1, ay1), (ax1, ay1), (ax1, y1), (ax0, y1),
                (ax0, ay1), (x0, ay1), (x0, ay0), (ax0, ay0)]
    if shape == "circle":
        return None
    raise ValueError(f"render: unknown shape '{shape}'")


def _background(bg: dict, size: int, rng: np.random.Generator) -> np.ndarray:
    base = np.array(bg["color"], dtype=np.float32)
    kind = bg["kind"]
    if kind == "plain":
        img = np.broadcast_to(base, (size, size, 3)).copy()
    elif kind == "gradient":
        other = np.array(bg["color2"], dtype=np.float32)
        t = np.linspace(0.0, 1.0, size, dtype=np.float32)
        ramp = t[:, None] if bg.get("vertical", True) else t[None, :]
        ramp = np.broadcast_to(ramp, (size, size))[..., None]
        img = base * (1 - ramp) + other * ramp
    elif kind == "texture":
        # Low-contrast value noise (coarse grid, bilinear upsampling) in the pale base color.
        cells = bg.get("cells", 12)
        noise = rng.uniform(-1.0, 1.0, size=(cells + 1, cells + 1)).astype(np.float32)
        grid = Image.fromarray(((noise + 1) * 127.5).astype(np.uint8))
        up = np.asarray(grid.resize((size, size), Image.BILINEAR), dtype=np.float32) / 127.5 - 1
        img = base[None, None, :] + bg.get("amplitude", 10.0) * up[..., None]
    else:
        raise ValueError(f"render: unknown background kind '{kind}'")
    return np.clip(img, 0, 255)


def _draw_shape(draw: ImageDraw.ImageDraw, shape: str, bbox, fill: int):
    poly = shape_polygon(shape, bbox)
    if poly is None:
        draw.ellipse(bbox, fill=fill)
    else:
        draw.polygon(poly, fill=fill)


def _pattern_mask(pattern: str, bbox, shape, origin, phase: float) -> np.ndarray:
    """Boolean mask of `shape` (rows, cols) at pixel `origin` where the darker pattern shade goes."""
    yy, xx = np.mgrid[0:shape[0], 0:shape[1]].astype(np.float32)
    yy += origin[1]
    xx += origin[0]
    w = bbox[2] - bbox[0]
    if pattern == "striped":
        period = max(w / 5.0, 6.0 * SUPERSAMPLE)
        return ((xx + yy + phase * period) % period) < 0.28 * period
    if pattern == "dotted":
        period = max(w / 4.5, 8.0 * SUPERSAMPLE)
        dx = (xx - bbox[0] + phase * period) % period - period / 2
        dy = (yy - bbox[1] + phase * period) % period - period / 2
        return dx * dx + dy * dy < (0.28 * period) ** 2
    return np.zeros(shape, dtype=bool)


def render_scene(scene: dict, size: int = IMAGE_SIZE) -> np.ndarray:
    """Scene -> uint8 array (size, size, 3)."""
    rng = np.random.default_rng(scene.get("seed", 0))
    big = size * SUPERSAMPLE
    img = _background(scene["background"], big, rng)
    for obj in scene["objects"]:
        bbox = [v * SUPERSAMPLE * size / IMAGE_SIZE for v in obj["bbox"]]
        # Draw in a crop around the box: whole-canvas masks would dominate the cost.
        x0, y0 = max(int(bbox[0]) - 2, 0), max(int(bbox[1]) - 2, 0)
        x1, y1 = min(int(bbox[2]) + 3, big), min(int(bbox[3]) + 3, big)
        local = [bbox[0] - x0, bbox[1] - y0, bbox[2] - x0, bbox[3] - y0]
        mask_img = Image.new("L", (x1 - x0, y1 - y0), 0)
        _draw_shape(ImageDraw.Draw(mask_img), obj["shape"], local, 255)
        mask = np.asarray(mask_img) > 127
        region = img[y0:y1, x0:x1]
        color = np.array(COLORS[obj["color"]], dtype=np.float32)
        region[mask] = color
        pat = obj.get("pattern", "solid")
        if pat != "solid":
            pmask = mask & _pattern_mask(pat, bbox, mask.shape, (x0, y0), obj.get("pattern_phase", 0.0))
            region[pmask] = color * PATTERN_SHADE
    small = Image.fromarray(img.astype(np.uint8)).resize((size, size), Image.BOX)
    return np.asarray(small)
