#!/usr/bin/env python3
"""Plots argen_characterize's CSVs (dev tooling; needs matplotlib).

usage: .venv/bin/python tools/characterize/plot.py --dir OUT
writes OUT/mass.png (Fig. 8 style), OUT/similarity.png (Fig. 10b style) and
OUT/locality.png (per-head locality score s_{l,h}).
"""
import argparse
import csv
import math
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def plot_mass(rows, out):
    layers = [r for r in rows if r["scope"] == "layer"]
    overall = [r for r in rows if r["scope"] == "all"][0]
    labels = [r["layer"] for r in layers] + ["all"]
    parts = {k: [float(r[k]) for r in layers] + [float(overall[k])] for k in ("prompt", "local", "middle")}
    fig, ax = plt.subplots(figsize=(max(6, len(labels) * 0.35), 3.5))
    bottom = [0.0] * len(labels)
    for key, color in (("prompt", "#4C72B0"), ("local", "#DD8452"), ("middle", "#55A868")):
        ax.bar(labels, parts[key], bottom=bottom, label=key, color=color)
        bottom = [b + v for b, v in zip(bottom, parts[key])]
    ax.set_xlabel("layer")
    ax.set_ylabel("attention mass")
    ax.set_ylim(0, 1.02)
    ax.legend(loc="lower right", fontsize=8)
    ax.set_title("attention mass on prompt / local (newest 10%) / middle decode keys")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def plot_similarity(rows, out):
    rows = [r for r in rows if r["scope"] == "all"]
    d = [int(r["d"]) for r in rows]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.plot(d, [float(r["vertical"]) for r in rows], "o-", ms=3, label="vertical")
    ax.plot(d, [float(r["diagonal"]) for r in rows], "s-", ms=3, label="diagonal")
    ax.set_xlabel("query distance d")
    ax.set_ylabel("cosine similarity")
    ax.set_ylim(0, 1.02)
    ax.legend()
    ax.set_title("attention-score vector similarity (all layers, heads)")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def plot_locality(rows, out):
    layers = 1 + max(int(r["layer"]) for r in rows)
    heads = 1 + max(int(r["head"]) for r in rows)
    grid = [[math.nan] * heads for _ in range(layers)]
    for r in rows:
        grid[int(r["layer"])][int(r["head"])] = float(r["s"])
    fig, ax = plt.subplots(figsize=(max(4, heads * 0.3), max(3, layers * 0.25)))
    im = ax.imshow(grid, aspect="auto", cmap="viridis", vmin=0, vmax=1)
    ax.set_xlabel("head")
    ax.set_ylabel("layer")
    ax.set_title("locality score s (share beyond the last w keys)")
    fig.colorbar(im, ax=ax)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", required=True, help="argen_characterize --out directory")
    args = parser.parse_args()
    plot_mass(read(os.path.join(args.dir, "mass.csv")), os.path.join(args.dir, "mass.png"))
    plot_similarity(read(os.path.join(args.dir, "similarity.csv")), os.path.join(args.dir, "similarity.png"))
    plot_locality(read(os.path.join(args.dir, "locality.csv")), os.path.join(args.dir, "locality.png"))
    print("wrote mass.png, similarity.png, locality.png in", args.dir)


if __name__ == "__main__":
    main()
