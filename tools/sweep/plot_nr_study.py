"""Plot of the N_r study (docs/quality.md): the diagonal policy's overall score against
sparsity for each recent window N_r, with the full sweep's other policies and dense.

  python tools/sweep/plot_nr_study.py [--results tools/sweep/results] [--out docs/images/quality_nr_study.png]

Reads the N_r tables that tools/sweep/device_nr_study.sh wrote (h200-2026-11-29-nr/*.md: a
"| N_r | S% | ..." table each) and the full sweep's report.md (h200-2026-11-29/report.md,
its "## Overall" table).
"""
from __future__ import annotations

import argparse
import glob
import os
import re
from collections import defaultdict


def parse_table(lines):
    """Rows of the first markdown table in `lines`: (header cells, [row cells])."""
    rows = []
    for l in lines:
        if l.startswith("|"):
            rows.append(l)
        elif rows:
            break  # the table ended
    cells = [[c.strip() for c in r.strip().strip("|").split("|")] for r in rows]
    return cells[0], [r for r in cells[2:]]


def pct(cell: str) -> float:
    return float(cell.rstrip("%"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default="tools/sweep/results")
    ap.add_argument("--out", default="docs/images/quality_nr_study.png")
    args = ap.parse_args()

    diag = defaultdict(dict)  # N_r -> {sparsity: score}
    for path in sorted(glob.glob(os.path.join(args.results, "h200-2026-11-29-nr", "*.md"))):
        header, rows = parse_table(open(path).read().splitlines())
        cols = [pct(h) for h in header[1:]]
        for r in rows:
            for s, v in zip(cols, r[1:]):
                if re.fullmatch(r"[0-9.]+", v):
                    diag[int(r[0])][s] = float(v)

    report = open(os.path.join(args.results, "h200-2026-11-29", "report.md")).read().splitlines()
    start = report.index("## Overall")
    header, rows = parse_table(report[start:start + 16])
    cols = [pct(h) for h in header[1:]]
    full = {r[0]: {s: float(v) for s, v in zip(cols, r[1:]) if v != "-"} for r in rows}
    for s, v in full["diagonal"].items():
        diag[288].setdefault(s, v)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5))
    ax.axhline(full["dense"][0.0], color="black", ls="--", lw=1, label="dense")
    for name, color in (("sliding_window", "tab:blue"), ("streaming_llm", "tab:orange"), ("alisa", "tab:purple")):
        xs = sorted(full[name])
        ax.plot(xs, [full[name][x] for x in xs], "o-", color=color, lw=1, ms=4, alpha=0.6, label=f"{name} (full sweep)")
    cmap = plt.get_cmap("viridis")
    windows = sorted(diag)
    for i, nr in enumerate(windows):
        xs = sorted(diag[nr])
        bold = nr == 64
        ax.plot(xs, [diag[nr][x] for x in xs], "s-", color="tab:red" if bold else cmap(i / max(1, len(windows) - 1)),
                lw=2.5 if bold else 1.2, ms=6 if bold else 4, label=f"diagonal, N_r = {nr}")
    ax.set_xlabel("decode KV sparsity (%)")
    ax.set_ylabel("GenEval-style score (overall)")
    ax.set_title("Diagonal policy against its recent window N_r (shipped model, H200)")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower left", ncol=2)
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
