#!/usr/bin/env bash
# tools/sweep/device_sweep.sh end to end on the CPU with the tiny checkpoint:
# a complete run (outputs in $OUT, status "complete"), a continuation on a
# "fresh machine" (new work dir) that skips what the first report holds and
# merges both, a run stopped at the deadline before any image ("partial"),
# and usage errors.
#   device_sweep_test.sh BIN_DIR PYTHON     (exit 77: numpy/pillow/matplotlib missing)
set -euo pipefail
bin="$1"
python="$2"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
if ! "$python" -c "import numpy, PIL, matplotlib" 2>/dev/null; then
  echo "device_sweep_test: skipped (needs numpy, pillow, matplotlib: scripts/dev-python.sh)"
  exit 77
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "device_sweep_test: FAIL: $*" >&2; exit 1; }
export ARGEN_BIN="$bin" ARGEN_PYTHON="$python" ARGEN_SWEEP_BACKEND=cpu
script="$root/tools/sweep/device_sweep.sh"
common=(--model "$root/tests/goldens/tiny/tiny-mha" --max-batch-rows 8 --time-limit 300 --report-reserve 60
        --report-workers 2 --image-threads 2)
grid=(--images-per-prompt 1 --max-prompts 3 --threads 1 --top_k 20)

# 1. A complete run of dense + diagonal at 50%.
OUT="$tmp/a" "$script" "${common[@]}" --work "$tmp/wa" -- "${grid[@]}" --policies dense,diagonal --sparsities 50 \
  || fail "run a: exit $?"
[[ "$(cat "$tmp/a/status.txt")" == complete ]] || fail "run a status: $(cat "$tmp/a/status.txt")"
for f in report.md report.json quality_vs_sparsity.png sweep.log report.log sweep_settings.json; do
  [[ -s "$tmp/a/$f" ]] || fail "run a: no $f"
done
[[ ! -e "$tmp/a/manifest.jsonl" ]] || fail "the manifest is copied to OUT"
grep -q "| diagonal | - | " "$tmp/a/report.md" || fail "run a table: $(cat "$tmp/a/report.md")"

# 2. A continuation on a fresh work dir with a larger grid: only the new configuration runs.
OUT="$tmp/b" "$script" "${common[@]}" --work "$tmp/wb" --continue-from "$tmp/a/report.json" \
  -- "${grid[@]}" --policies dense,diagonal,sliding_window --sparsities 50 || fail "run b: exit $?"
grep -q "3 requests to run, 6 excluded" "$tmp/b/sweep.log" || fail "run b did not skip run a's work: $(cat "$tmp/b/sweep.log")"
[[ -s "$tmp/b/merged/report.json.gz" && -s "$tmp/b/merged/report.md" ]] || fail "run b: no merged report"
grep -q "| sliding_window | - | " "$tmp/b/merged/report.md" || fail "merged table lacks sliding_window"
grep -q "| diagonal | - | " "$tmp/b/merged/report.md" || fail "merged table lacks diagonal"
n="$("$python" -c "import gzip, json; print(len(json.load(gzip.open('$tmp/b/merged/report.json.gz', 'rt'))['images']))")"
[[ "$n" == 9 ]] || fail "merged report has $n images, want 9"

# 3. A deadline that passes before any request: partial, nothing to score, exit 1.
set +e
OUT="$tmp/c" "$script" "${common[@]}" --work "$tmp/wc" -- "${grid[@]}" --policies dense --deadline-seconds 0.000001
rc=$?
set -e
[[ $rc == 1 ]] || fail "run c: exit $rc, want 1"
grep -q "^partial: 3 requests left" "$tmp/c/status.txt" || fail "run c status: $(cat "$tmp/c/status.txt")"

# 4. Usage errors.
set +e
OUT="$tmp/d" "$script" --bogus > /dev/null 2>&1; [[ $? == 2 ]] || fail "--bogus"
OUT="$tmp/d" "$script" "${common[@]}" --time-limit 60 > /dev/null 2>&1; [[ $? == 2 ]] || fail "a too short time limit"
OUT="$tmp/d" ARGEN_BIN="$tmp/nowhere" "$script" > /dev/null 2>&1; [[ $? == 2 ]] || fail "no binary"
set -e
echo "device_sweep_test: ok"
