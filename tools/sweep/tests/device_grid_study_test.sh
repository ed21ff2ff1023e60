#!/usr/bin/env bash
# tools/sweep/device_grid_study.sh end to end on the CPU with the tiny checkpoint (no bench):
# a run without a baseline, then one merged with the first run's per-image report as its
# baseline (the merged table holds both runs' policies), and usage errors.
#   device_grid_study_test.sh BIN_DIR PYTHON     (exit 77: numpy/pillow/matplotlib missing)
set -euo pipefail
bin="$1"
python="$2"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
if ! "$python" -c "import numpy, PIL, matplotlib" 2>/dev/null; then
  echo "device_grid_study_test: skipped (needs numpy, pillow, matplotlib)"
  exit 77
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "device_grid_study_test: FAIL: $*" >&2; exit 1; }
export ARGEN_BIN="$bin" ARGEN_PYTHON="$python" ARGEN_SWEEP_BACKEND=cpu GRID_BENCH="" GRID_MAX_BATCH_ROWS=8
export GRID_MODEL="$root/tests/goldens/tiny/tiny-mha" GRID_SPARSITIES=50,75 GRID_TIME_LIMIT=300 GRID_REPORT_RESERVE=60
export GRID_SWEEP_ARGS="--images-per-prompt 1 --max-prompts 2 --threads 1 --top_k 20"
script="$root/tools/sweep/device_grid_study.sh"

# 1. The new policies and diagonal with its own window (invalid at 50%: skipped), no baseline.
OUT="$tmp/a" GRID_WORK="$tmp/wa" GRID_POLICIES=dense,grid_window,diagonal:24 GRID_BASELINE=none "$script" \
  || fail "run a: exit $?"
[[ "$(cat "$tmp/a/status.txt")" == complete ]] || fail "run a status: $(cat "$tmp/a/status.txt")"
for f in report.md merged.md report.json.gz quality_vs_sparsity.png sweep.log status.txt; do
  [[ -s "$tmp/a/$f" ]] || fail "run a: no $f"
done
(( $(ls "$tmp/a" | wc -l) <= 8 )) || fail "more than 8 files in OUT: $(ls "$tmp/a")"
grep -q "skipped: configuration diagonal_nr24_50" "$tmp/a/sweep.log" || fail "diagonal:24 at 50% not skipped"
grep -q "| grid_window | - | " "$tmp/a/report.md" || fail "run a table: $(cat "$tmp/a/report.md")"
grep -q "| diagonal_nr24 | - | - | " "$tmp/a/report.md" || fail "run a: diagonal_nr24 row: $(cat "$tmp/a/report.md")"
grep -q "Mean PSNR" "$tmp/a/report.md" || fail "run a: no PSNR against dense"

# 2. Merged with run a as the baseline: both runs' policies in merged.md, this run's in report.md.
OUT="$tmp/b" GRID_WORK="$tmp/wb" GRID_POLICIES=dense,diagonal_grid GRID_BASELINE="$tmp/a/report.json.gz" "$script" \
  || fail "run b: exit $?"
grep -q "| diagonal_grid | - | " "$tmp/b/merged.md" || fail "merged lacks diagonal_grid: $(cat "$tmp/b/merged.md")"
grep -q "| grid_window | - | " "$tmp/b/merged.md" || fail "merged lacks the baseline's grid_window"
! grep -q "| grid_window |" "$tmp/b/report.md" || fail "run b's own report holds the baseline"

# 3. Usage errors: no binary, a missing baseline, ssd on a model without its head file.
set +e
OUT="$tmp/d" ARGEN_BIN="$tmp/nowhere" "$script" > /dev/null 2>&1; [[ $? == 2 ]] || fail "no binary"
OUT="$tmp/d" GRID_POLICIES=dense GRID_BASELINE="$tmp/none.json.gz" "$script" > /dev/null 2>&1; [[ $? == 2 ]] || fail "missing baseline"
OUT="$tmp/d" GRID_POLICIES=dense,ssd GRID_BASELINE=none "$script" > /dev/null 2>&1; [[ $? == 2 ]] || fail "ssd without heads"
OUT="$tmp/d" GRID_POLICIES=dense GRID_TIME_LIMIT=100 GRID_BASELINE=none "$script" > /dev/null 2>&1; [[ $? == 2 ]] || fail "short time limit"
set -e
echo "device_grid_study_test: ok"
