"""The SASS lines of an ncu source page (ncu --page source --csv --print-source sass) with the most
warp-stall samples: where a kernel's warps wait. Used by bench/gpu/scenarios/profile.sh.

    python3 top_stalls.py source.csv [N]
"""
import csv
import sys


def main() -> int:
    path, top = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    header_at = next((i for i, r in enumerate(rows) if any("Source" == c.strip() for c in r)), None)
    if header_at is None:
        print(f"top_stalls: no 'Source' column in {path}")
        return 1
    header = rows[header_at]
    source = header.index(next(c for c in header if c.strip() == "Source"))
    col = next((i for i, c in enumerate(header) if "Stall Sampling (All" in c), None)
    if col is None:
        print(f"top_stalls: no stall-sampling column in {path}; columns: {header}")
        return 1

    def count(r):
        try:
            return float(r[col].replace(",", ""))
        except (ValueError, IndexError):
            return 0.0

    body = [r for r in rows[header_at + 1:] if len(r) > max(col, source)]
    total = sum(count(r) for r in body) or 1.0
    print(f"top {top} of {len(body)} SASS lines by '{header[col]}' ({total:.0f} samples)")
    for r in sorted(body, key=count, reverse=True)[:top]:
        print(f"{100 * count(r) / total:5.1f}%  {r[source].strip()[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
