#!/usr/bin/env python3
"""Summary table of bench/gpu/run_vq_device.sh's logs (in the folder given).

Reads vq384.log / vq192.log (argen_vq_bench's final table), torch_vq384.log
(torch_vq_bench.py) and results.jsonl (torch_janus_loop.py's torch_loop lines
and argen_bench's e2e lines), prints the VQ decoder's images/s per precision
and batch with the ratios against the same run's baselines, and the end-to-end
table: the careful PyTorch loop against argen_bench dense and diagonal 95%.
"""

from __future__ import annotations

import json
import os
import re
import sys

ROW = re.compile(r"^((?:cuda|torch)-[\w-]+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)")


def vq_rows(path):
    rows = {}
    if not os.path.exists(path):
        return rows
    for line in open(path, errors="replace"):
        m = ROW.match(line.strip())
        if m:
            rows[(m.group(1), int(m.group(2)))] = float(m.group(4))  # images/s
    return rows


def fmt(x):
    return f"{x:8.1f}" if x is not None else "       -"


def vq_table(out, size, torch_rows):
    rows = vq_rows(os.path.join(out, f"vq{size}.log"))
    if not rows:
        print(f"VQ-16 decoder at {size} px: no results")
        return
    rows.update(torch_rows)
    batches = sorted({b for (_, b) in rows})
    cols = ["cuda-fp32", "cuda-tf32", "cuda-bf16", "torch-fp32", "torch-tf32", "torch-bf16", "torch-bf16-cl"]
    cols = [c for c in cols if any((c, b) in rows for b in batches)]
    print(f"\nVQ-16 decoder, {size} px, images/s (Decode: tokens on the host -> RGB8 on the host; same run)")
    print("batch " + " ".join(f"{c:>13}" for c in cols) + "   bf16/fp32  bf16/best-torch")
    for b in batches:
        vals = [rows.get((c, b)) for c in cols]
        line = f"{b:5d} " + " ".join(f"{fmt(v):>13}" for v in vals)
        bf16, fp32 = rows.get(("cuda-bf16", b)), rows.get(("cuda-fp32", b))
        torch_best = max([rows[(c, b)] for c in cols if c.startswith("torch") and (c, b) in rows], default=None)
        line += f"   {bf16 / fp32:8.2f}x" if bf16 and fp32 else "          -"
        line += f"   {bf16 / torch_best:8.2f}x" if bf16 and torch_best else "          -"
        print(line)
    if size == 384 and ("cuda-bf16", 64) in rows:
        print(f"target (issue #13): >= 400 img/s at batch 64, 384 px: bf16 {rows[('cuda-bf16', 64)]:.1f} img/s")


def e2e_table(out):
    path = os.path.join(out, "results.jsonl")
    if not os.path.exists(path):
        print("\nend to end: no results.jsonl")
        return
    loop, argen = {}, {}
    for line in open(path, errors="replace"):
        try:
            r = json.loads(line)
        except json.JSONDecodeError:
            continue
        if r.get("kind") == "torch_loop":
            loop[(r["model"], r["images"])] = r["img_per_s"]
        elif r.get("kind") == "e2e" and not r.get("max_batch"):
            argen[(r["model"], r["policy"], r["images"])] = r["img_per_s"]
    print("\nEnd to end, random weights, 50-token prompts, 576 image tokens, CFG (img/s, prefill included; same run)")
    print(f"{'model':<5} {'images':>6} {'torch loop':>11} {'argen dense':>12} {'x':>6} {'diagonal 95%':>13} {'x':>6}")
    keys = sorted({(m, i) for (m, i) in loop} | {(m, i) for (m, _, i) in argen})
    for m, i in keys:
        t = loop.get((m, i))
        d = argen.get((m, "dense", i))
        s = argen.get((m, "diagonal:0.95", i))
        rd = f"{d / t:5.2f}x" if d and t else "     -"
        rs = f"{s / t:5.2f}x" if s and t else "     -"
        print(f"{m:<5} {i:>6} {fmt(t):>11} {fmt(d):>12} {rd:>6} {fmt(s):>13} {rs:>6}")


def main() -> int:
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    torch_rows = vq_rows(os.path.join(out, "torch_vq384.log"))
    vq_table(out, 384, torch_rows)
    vq_table(out, 192, vq_rows(os.path.join(out, "torch_vq192.log")))
    e2e_table(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
