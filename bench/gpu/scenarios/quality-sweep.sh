# The quality sweep on the GPU (tools/sweep/device_sweep.sh, shipped model models/argen-scenes-v1, which must be
# carried): score and PSNR of fp8 KV and fp8 weights beside bf16, dense and diagonal. SWEEP_ARGS overrides the grid,
# SWEEP_MODEL the model folder (e.g. models/argen-lumina-scenes-v1, which must then be carried).
# SWEEP_SPECULATIVE="4,8" adds every configuration at those speculative_windows (exact: its score must match
# sequential's within sampling noise; the sparse ones are skipped as invalid), folders <config>_sw<N>.
# Sourced by bench/gpu/lab.sh, which reads BASELINE and NEEDS and provides BIN, AB_DIRS, OUT, stamp, guarded.
# shellcheck shell=bash disable=SC2034,SC2154
BASELINE="dense bf16 in the same sweep (scores side by side; PSNR against it)"
NEEDS="argen_sweep"
run_scenario() {
  local left=$((DEADLINE - ($(date +%s) - t0) - 10)) reserve
  reserve=$((left / 3 < 100 ? left / 3 : 100))  # scoring time, kept when generation stops
  stamp "quality sweep, $left s"
  mkdir -p "$OUT/quality-sweep"
  # shellcheck disable=SC2086
  OUT="$OUT/quality-sweep" ARGEN_BIN=$BIN ARGEN_PYTHON=$PYTHON tools/sweep/device_sweep.sh ${SWEEP_MODEL:+--model "$SWEEP_MODEL"} --time-limit "$left" \
    --report-reserve "$reserve" \
    --work "$LAB_WORK/sweep" -- ${SWEEP_ARGS:---policies dense,dense@fp8,diagonal,diagonal@fp8,diagonal:64,diagonal:64@fp8 --sparsities 90,95 --cfg 3 --skip-invalid} \
    ${SWEEP_SPECULATIVE:+--speculative-windows "$SWEEP_SPECULATIVE"}
  echo "device_sweep rc=$?"
  cat "$OUT/quality-sweep/status.txt" 2>/dev/null
  sed -n '/## Overall/,/^## [^O]/p' "$OUT/quality-sweep/report.md" 2>/dev/null | head -14
  sed -n '/Mean PSNR/,/^## Mean decode/p' "$OUT/quality-sweep/report.md" 2>/dev/null | head -14
}
summarize() { sed -n '/^== /p; /^device_sweep rc=/,$p' "$1" | cut -c1-200; }
