"""Spatial relations between boxes, by GenEval's rule (center offset less 10% of the summed
box sizes, normalised; a relation holds when its component exceeds 0.5)."""

from __future__ import annotations

import math

POSITION_THRESHOLD = 0.1


def relations(box_a, box_b) -> set[str]:
    """Relations of box_a relative to box_b; boxes are (x0, y0, x1, y1), y down."""
    ca = ((box_a[0] + box_a[2]) / 2, (box_a[1] + box_a[3]) / 2)
    cb = ((box_b[0] + box_b[2]) / 2, (box_b[1] + box_b[3]) / 2)
    dims = (box_a[2] - box_a[0] + box_b[2] - box_b[0], box_a[3] - box_a[1] + box_b[3] - box_b[1])
    offset = (ca[0] - cb[0], ca[1] - cb[1])
    revised = [math.copysign(max(abs(o) - POSITION_THRESHOLD * d, 0.0), o) for o, d in zip(offset, dims)]
    norm = math.hypot(*offset)
    if norm < 1e-6 or all(abs(r) < 1e-3 for r in revised):
        return set()
    dx, dy = revised[0] / norm, revised[1] / norm
    out = set()
    if dx < -0.5:
        out.add("left of")
    if dx > 0.5:
        out.add("right of")
    if dy < -0.5:
        out.add("above")
    if dy > 0.5:
        out.add("below")
    return out
