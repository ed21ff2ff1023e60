#!/usr/bin/env bash
# FP8 KV quality against auto (bf16) on a lent GPU, in one call: argen_sweep twice over the same
# grid, prompts and seeds (--kv-cache-dtype auto, then fp8), report.py on each, then
# compare_runs.py image by image (PSNR of each fp8 image against its auto twin, both scores).
#
#   ARGEN_BIN=/tmp/b/bin ARGEN_SOURCE_DIR=$PWD tools/sweep/device_kv_study.sh [-- argen_sweep options]
#
# Environment (defaults in brackets): KV_POLICIES [dense,diagonal:64], KV_SPARSITIES [90,95],
# KV_SWEEP_ARGS [--per-category 30 --cfg 3: 144 prompts x 4 images], KV_MODEL
# [models/argen-scenes-v1], KV_BACKEND [cuda; the test runs cpu], KV_MAX_BATCH_ROWS [1024],
# KV_DTYPE_FLAG [--kv-cache-dtype; --weight-dtype compares fp8 weights with auto the same way],
# KV_TIME_LIMIT [540 s in all], KV_REPORT_RESERVE [120 s for the two reports and the comparison],
# KV_WORK [/tmp/argen-kv-study], ARGEN_PYTHON [python3, or the repo's .venv], OUT [./device-out].
# Each sweep gets half the generation time (--deadline-seconds); pairs only one run finished are
# left out of the comparison. Writes to $OUT: kv_study.md (the comparison), kv_study.json,
# report_auto.md, report_fp8.md, sweep_auto.log, sweep_fp8.log, report.log, settings_auto.json,
# settings_fp8.json. Exit 0 when everything ran, 1 when a step failed, 2 for usage errors.
set -uo pipefail

start=$SECONDS
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="${ARGEN_BIN:-/tmp/b/bin}"
out="${OUT:-$PWD/device-out}"
work="${KV_WORK:-/tmp/argen-kv-study}"
model="${KV_MODEL:-$root/models/argen-scenes-v1}"
time_limit="${KV_TIME_LIMIT:-540}"
reserve="${KV_REPORT_RESERVE:-120}"
read -r -a sweep_args <<< "${KV_SWEEP_ARGS:---per-category 30 --cfg 3}"
extra=()
if [[ "${1:-}" == "--" ]]; then shift; extra=("$@"); elif [[ $# -gt 0 ]]; then
  echo "device_kv_study.sh: argen_sweep options go after --, got $1" >&2; exit 2
fi
for v in time_limit reserve; do
  if ! [[ "${!v}" =~ ^[0-9]+$ ]]; then echo "device_kv_study.sh: $v must be a whole number, got ${!v}" >&2; exit 2; fi
done
sweep_bin="$bin/argen_sweep"
if [[ ! -x "$sweep_bin" ]]; then
  echo "device_kv_study.sh: $sweep_bin not found (set ARGEN_BIN to the bundle's bin folder)" >&2
  exit 2
fi
python="${ARGEN_PYTHON:-python3}"
if [[ -x "$root/.venv/bin/python" && -z "${ARGEN_PYTHON:-}" ]]; then python="$root/.venv/bin/python"; fi
if ! "$python" -c "import numpy, PIL" 2>/dev/null; then
  echo "device_kv_study.sh: $python lacks numpy or pillow (set ARGEN_PYTHON)" >&2
  exit 2
fi
per_sweep=$(((time_limit - reserve - 30) / 2))
if (( per_sweep < 20 )); then
  echo "device_kv_study.sh: KV_TIME_LIMIT $time_limit leaves $per_sweep s per sweep after the ${reserve} s reserve" >&2
  exit 2
fi
rm -rf "$work"
mkdir -p "$out" "$work"
log() { echo "device_kv_study: [$((SECONDS - start)) s] $*" | tee -a "$out/report.log" >&2; }
cd "$root"

failed=0
for dtype in auto fp8; do
  log "argen_sweep ${KV_DTYPE_FLAG:---kv-cache-dtype} $dtype, deadline ${per_sweep} s"
  timeout --signal=TERM --kill-after=10 $((per_sweep + 60)) \
    "$sweep_bin" --model "$model" --backend "${KV_BACKEND:-cuda}" --out "$work/$dtype" "${KV_DTYPE_FLAG:---kv-cache-dtype}" "$dtype" \
      --policies "${KV_POLICIES:-dense,diagonal:64}" --sparsities "${KV_SPARSITIES:-90,95}" \
      --max-batch-rows "${KV_MAX_BATCH_ROWS:-1024}" --deadline-seconds "$per_sweep" "${sweep_args[@]}" "${extra[@]}" \
      > "$out/sweep_$dtype.log" 2>&1
  rc=$?
  log "argen_sweep $dtype exit $rc ($(wc -l < "$work/$dtype/manifest.jsonl" 2>/dev/null || echo 0) images)"
  cp "$work/$dtype/sweep_settings.json" "$out/settings_$dtype.json" 2>/dev/null || true
  if [[ $rc -ne 0 ]]; then failed=1; fi
done
if [[ $failed -ne 0 ]]; then log "a sweep failed (sweep_*.log)"; exit 1; fi

workers="$(nproc)"
for dtype in auto fp8; do
  budget=$(((time_limit - (SECONDS - start) - 20) / 2))
  (( budget > 10 )) || budget=10
  timeout --signal=TERM --kill-after=5 "$budget" "$python" tools/sweep/report.py "$work/$dtype" --workers "$workers" \
      --no-plot --md "$out/report_$dtype.md" >> "$out/report.log" 2>&1 || { log "report.py $dtype failed"; failed=1; }
done
"$python" tools/sweep/compare_runs.py "$work/auto" "$work/fp8" --md "$out/kv_study.md" --json "$out/kv_study.json" \
    >> "$out/report.log" 2>&1 || { log "compare_runs.py failed"; exit 1; }
cat "$out/kv_study.md"
log "done"
exit $failed
