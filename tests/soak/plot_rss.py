#!/usr/bin/env python3
"""Plots the soak's memory curve: tests/soak/plot_rss.py rss.csv rss.png (matplotlib)."""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    src, dst = sys.argv[1], sys.argv[2]
    done, rss, dev = [], [], []
    with open(src) as f:
        for row in csv.DictReader(f):
            done.append(int(row["requests"]))
            rss.append(int(row["rss_kib"]) / 1024.0)
            dev.append(float(row["device_mib"]) if row.get("device_mib") else None)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    ax.plot(done, rss, label="server RSS (MiB)")
    if any(d is not None for d in dev):
        ax.plot(done, [d if d is not None else float("nan") for d in dev], label="device memory used (MiB)")
    ax.axvline(done[-1] / 5 if done else 0, color="gray", linestyle=":", label="end of warm-up (20%)")
    ax.set_xlabel("requests completed")
    ax.set_ylabel("MiB")
    ax.set_ylim(bottom=0)
    ax.legend(loc="lower right")
    ax.set_title("argen soak: memory over the run")
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main()
