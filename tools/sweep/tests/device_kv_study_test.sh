#!/usr/bin/env bash
# tools/sweep/device_kv_study.sh end to end on the CPU with the tiny checkpoint: both sweeps, both
# reports and the comparison (every fp8 image differs from its auto twin: the CPU rounds its KV
# through e4m3), then compare_runs.py's refusal of unpaired runs and the script's usage errors.
#   device_kv_study_test.sh BIN_DIR PYTHON     (exit 77: numpy/pillow missing)
set -euo pipefail
bin="$1"
python="$2"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
if ! "$python" -c "import numpy, PIL" 2>/dev/null; then
  echo "device_kv_study_test: skipped (needs numpy, pillow)"
  exit 77
fi
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "device_kv_study_test: FAIL: $*" >&2; exit 1; }
export ARGEN_BIN="$bin" ARGEN_PYTHON="$python" KV_BACKEND=cpu KV_MODEL="$root/tests/goldens/tiny/tiny-mha"
export KV_POLICIES=dense,diagonal KV_SPARSITIES=50 KV_MAX_BATCH_ROWS=8 KV_TIME_LIMIT=300 KV_REPORT_RESERVE=60
export KV_SWEEP_ARGS="--images-per-prompt 1 --max-prompts 2 --threads 1 --top_k 20"
script="$root/tools/sweep/device_kv_study.sh"

OUT="$tmp/out" KV_WORK="$tmp/work" "$script" > "$tmp/stdout" 2> "$tmp/stderr" || fail "exit $?: $(cat "$tmp/stderr")"
for f in kv_study.md kv_study.json report_auto.md report_fp8.md sweep_auto.log sweep_fp8.log settings_fp8.json; do
  [[ -s "$tmp/out/$f" ]] || fail "no $f"
done
grep -q '"kv_cache_dtype": "fp8"' "$tmp/out/settings_fp8.json" || fail "fp8 settings: $(cat "$tmp/out/settings_fp8.json")"
! grep -q kv_cache_dtype "$tmp/out/settings_auto.json" || fail "auto settings name a dtype"
grep -q "kv_cache_dtype: absent -> fp8" "$tmp/out/kv_study.md" || fail "kv_study.md: $(cat "$tmp/out/kv_study.md")"
for c in dense_0 diagonal_50; do
  # | config | images | mean PSNR | identical | score base | score other | delta | agree |
  row=$(grep "^| $c |" "$tmp/out/kv_study.md") || fail "no row $c: $(cat "$tmp/out/kv_study.md")"
  awk -F'|' '{ if ($3 + 0 != 2 || $4 + 0 >= 99 || $5 + 0 != 0 || $6 ~ /-/) exit 1 }' <<< "$row" \
    || fail "row $c: $row (want 2 images, none identical, both scores)"
done

# compare_runs.py refuses runs that are not paired (another seed), naming the setting.
cp -r "$tmp/work/auto" "$tmp/other"
"$python" - "$tmp/other/sweep_settings.json" <<'PY'
import json, sys
p = sys.argv[1]
s = json.load(open(p))
s["seed"] = s["seed"] + 1
json.dump(s, open(p, "w"))
PY
set +e
"$python" "$root/tools/sweep/compare_runs.py" "$tmp/work/auto" "$tmp/other" > /dev/null 2> "$tmp/err"
[[ $? == 2 ]] || fail "unpaired runs: not exit 2"
grep -q 'setting "seed" differs' "$tmp/err" || fail "unpaired runs: $(cat "$tmp/err")"
# The same run against itself: every image identical.
"$python" "$root/tools/sweep/compare_runs.py" "$tmp/work/auto" "$tmp/work/auto" --md "$tmp/same.md" > /dev/null \
  || fail "self comparison failed"
grep -q "^| dense_0 | 2 | 99.0 | 2 |" "$tmp/same.md" || fail "self comparison: $(cat "$tmp/same.md")"
# Usage errors.
OUT="$tmp/d" ARGEN_BIN="$tmp/nowhere" "$script" > /dev/null 2>&1; [[ $? == 2 ]] || fail "no binary"
OUT="$tmp/d" KV_TIME_LIMIT=100 "$script" > /dev/null 2>&1; [[ $? == 2 ]] || fail "short time limit"
OUT="$tmp/d" "$script" --kv-cache-dtype fp8 > /dev/null 2>&1; [[ $? == 2 ]] || fail "options without --"
set -e
echo "device_kv_study_test: ok"
