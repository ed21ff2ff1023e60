#!/usr/bin/env python3
"""Writes tests/goldens/characterize/stats.json: a random decode-phase
attention map and its section-3 statistics computed with numpy from the
definitions (paper section 3.4, Fig. 8 and Fig. 10; ssd-notes' s_{l,h}),
independently of tools/characterize/attention_stats.cc.

Run with the development Python:
  .venv/bin/python tools/goldens/make_characterize_golden.py

Definitions (decode query t sees prompt keys 0..L_p-1 then decode keys 0..t):
  mass: prompt = weight on the prompt; local = weight on the newest
        ceil((t+1)/10) decode keys; middle = the other decode keys;
        means over queries.
  similarity at distance d (key space K = decode keys or the whole sequence,
        v_t = query t's weights over K, i = index of query t in K):
        vertical = cos(v_t[0..i], v_{t+d}[0..i]),
        diagonal = cos(v_t[0..i], v_{t+d}[d..i+d]); means over t (t+d < T).
  locality (window w): mean over queries of
        sum(a[k] for k <= q-1-w) / sum(a[k] for k <= q-1), q = query index in K,
        skipping queries whose denominator is 0.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

LP, T, MAX_D, W = 7, 40, 5, 8
ROOT = Path(__file__).resolve().parents[2]


def make_rows(rng):
    rows = []
    for t in range(T):
        n = LP + t + 1
        logits = rng.normal(0.0, 1.5, n)
        lag = np.arange(n)[::-1]  # sequence distance to the query
        logits += np.where(lag % 6 == 0, 2.0, 0.0)  # a diagonal stripe
        logits[:LP] += 1.0  # prompt emphasis
        p = np.exp(logits - logits.max())
        p /= p.sum()
        rows.append(p.astype(np.float32))
    return rows


def cos(a, b):
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    if na == 0 and nb == 0:
        return None
    if na == 0 or nb == 0:
        return 0.0
    return float(np.dot(a, b) / (na * nb))


def stats(rows):
    r64 = [r.astype(np.float64) for r in rows]
    prompt = local = middle = 0.0
    for t, r in enumerate(r64):
        n_local = -(-(t + 1) // 10)
        dec = r[LP:]
        prompt += r[:LP].sum()
        local += dec[t + 1 - n_local:].sum()
        middle += dec[: t + 1 - n_local].sum()
    out = {"mass": {"prompt": prompt / T, "local": local / T, "middle": middle / T}}

    for space in ("decode", "sequence"):
        vec = (lambda r: r[LP:]) if space == "decode" else (lambda r: r)
        sims = []
        for d in range(1, MAX_D + 1):
            v_sum = g_sum = 0.0
            pairs = 0
            for t in range(T - d):
                a, b = vec(r64[t]), vec(r64[t + d])
                i = len(a) - 1
                v = cos(a[: i + 1], b[: i + 1])
                g = cos(a[: i + 1], b[d : i + d + 1])
                if v is None or g is None:
                    continue
                v_sum += v
                g_sum += g
                pairs += 1
            sims.append({"d": d, "vertical": v_sum / pairs, "diagonal": g_sum / pairs, "pairs": pairs})
        out["similarity_" + space] = sims

    def locality(space):
        total, n = 0.0, 0
        for t, r in enumerate(r64):
            a = r[LP:] if space == "decode" else r
            q = len(a) - 1  # the query's own index
            den = a[:q].sum()
            if den <= 0:
                continue
            total += a[: max(0, q - W)].sum() / den
            n += 1
        return total / n if n else math.nan

    out["locality"] = locality("sequence")
    out["decode_locality"] = locality("decode")
    return out


def main():
    rng = np.random.default_rng(20261129)
    rows = make_rows(rng)
    golden = {
        "prompt_len": LP,
        "queries": T,
        "max_distance": MAX_D,
        "locality_window": W,
        "rows": [[float(x) for x in r] for r in rows],
        "expected": stats(rows),
    }
    path = ROOT / "tests/goldens/characterize/stats.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(golden, indent=1) + "\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
