"""Connected components and convex hulls in numpy (no scipy on the device)."""

from __future__ import annotations

import numpy as np


def label_components(mask: np.ndarray) -> tuple[np.ndarray, int]:
    """4-connected components of a boolean mask -> (labels with -1 for background, count).

    Min-label propagation with pointer jumping: each pixel holds the flat index of a
    pixel in its component, so labels[labels] shortcuts long chains.
    """
    h, w = mask.shape
    big = np.iinfo(np.int64).max
    lab = np.where(mask, np.arange(h * w, dtype=np.int64).reshape(h, w), big)
    while True:
        prev = lab
        m = lab.copy()
        m[1:, :] = np.minimum(m[1:, :], lab[:-1, :])
        m[:-1, :] = np.minimum(m[:-1, :], lab[1:, :])
        m[:, 1:] = np.minimum(m[:, 1:], lab[:, :-1])
        m[:, :-1] = np.minimum(m[:, :-1], lab[:, 1:])
        m = np.where(mask, m, big)
        flat = m.reshape(-1)
        fg = flat != big
        flat[fg] = np.minimum(flat[fg], flat[flat[fg]])  # pointer jump
        lab = flat.reshape(h, w)
        if np.array_equal(lab, prev):
            break
    roots, dense = np.unique(lab[mask], return_inverse=True)
    out = np.full((h, w), -1, dtype=np.int64)
    out[mask] = dense
    return out, len(roots)


def _row_extremes(points: np.ndarray) -> np.ndarray:
    """The distinct points sorted by (x, y), keeping per y only the smallest and largest x.

    A point strictly between two others on one horizontal line is never a hull vertex, so
    the hull (and the chain below, which drops collinear points) is the same as from every
    point; this only cuts the Python loop from O(boundary) to O(rows) points.
    """
    if len(points) == 0:
        return points.reshape(0, 2)
    by_row = points[np.lexsort((points[:, 0], points[:, 1]))]  # y, then x
    y = by_row[:, 1]
    first = np.ones(len(y), dtype=bool)
    first[1:] = y[1:] != y[:-1]
    last = np.ones(len(y), dtype=bool)
    last[:-1] = y[1:] != y[:-1]
    ext = by_row[first | last]
    same = np.zeros(len(ext), dtype=bool)
    same[1:] = np.all(ext[1:] == ext[:-1], axis=1)  # a row whose extremes are one point
    ext = ext[~same]
    return ext[np.lexsort((ext[:, 1], ext[:, 0]))]  # x, then y, as the monotone chain wants


def convex_hull_area(points: np.ndarray) -> float:
    """Area of the convex hull of 2-D points (Andrew's monotone chain, shoelace)."""
    pts = _row_extremes(np.asarray(points))
    if len(pts) < 3:
        return 0.0
    pts = pts.astype(np.float64).tolist()  # Python floats: the loop is exact on these small integers

    def half(seq):
        chain = []
        for p in seq:
            while len(chain) >= 2:
                (ax, ay), (bx, by) = chain[-2], chain[-1]
                if (bx - ax) * (p[1] - ay) - (by - ay) * (p[0] - ax) <= 0:
                    chain.pop()
                else:
                    break
            chain.append((p[0], p[1]))
        return chain

    lower, upper = half(pts), half(pts[::-1])
    hull = np.array(lower[:-1] + upper[:-1])
    x, y = hull[:, 0], hull[:, 1]
    return 0.5 * abs(float(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))))


def boundary_corners(comp: np.ndarray) -> np.ndarray:
    """Corner points (x, y) of the boundary pixels of a boolean mask: their hull is the mask's hull."""
    pad = np.pad(comp, 1)
    interior = pad[:-2, 1:-1] & pad[2:, 1:-1] & pad[1:-1, :-2] & pad[1:-1, 2:]
    ys, xs = np.nonzero(comp & ~interior)
    corners = [np.stack([xs + dx, ys + dy], axis=1) for dx in (0, 1) for dy in (0, 1)]
    return np.concatenate(corners, axis=0)
