#!/usr/bin/env bash
# The warp attention kernel (one warp per (token, kv head); kAuto takes it
# where splits == 1 and the keys fit 1024) against the two-pass kernel, in the
# same process each, bf16 and fp8 KV: random-weight Janus-Pro-7B at 64 images
# and on the full H200 (auto sizing); the attention tests; then the fp8
# quality sweep on the shipped model (bench/gpu/run_fp8_final_device.sh's).
# $OUT: tests.log bench.txt summary.txt sweep/.
set -u
. bench/gpu/bundle_env.sh
use_bundle "${BUNDLE:-warp}" || exit 1
t0=$(date +%s); DEADLINE=${DEADLINE:-585}
. bench/gpu/time_guard.sh
{
  for t in kernels_attention_test kernels_attention_fp8_test kernels_kv_fp8_conversion_test kernels_policy_test \
           cuda_backend_test cuda_vq_decoder_test; do
    stamp "$t"; guarded 90 "$BIN/$t" --gtest_brief=1; echo "rc($t)=$?"
  done
} >"$OUT/tests.log" 2>&1
B="$BIN/argen_bench --model 7b --prompt-len 50 --stage-steps 4 --out $OUT/bench.jsonl"
{
  for k in two-pass auto; do
    stamp "attention kernel $k: 64 images"
    guarded 60 $B --attention-kernel $k --batches 64 --policies dense,dense@fp8,diagonal:0.95:64,diagonal:0.95:64@fp8
  done
  for k in two-pass auto; do
    stamp "attention kernel $k: full H200, auto sizing"
    guarded 120 $B --attention-kernel $k --auto-sizing --max-batch --policies diagonal:0.95:64,diagonal:0.95:64@fp8
  done
} >"$OUT/bench.txt" 2>&1
left=$(( DEADLINE - ($(date +%s) - t0) - 10 ))
stamp "quality sweep, $left s" >>"$OUT/bench.txt"
mkdir -p "$OUT/sweep"
OUT="$OUT/sweep" ARGEN_BIN=$BIN tools/sweep/device_sweep.sh --time-limit "$left" --report-reserve 100 \
  -- --policies dense,dense@fp8,diagonal,diagonal@fp8,diagonal:64,diagonal:64@fp8 --sparsities 90,95 --cfg 3 \
     --skip-invalid >"$OUT/sweep.log" 2>&1
echo "device_sweep rc=$?" >>"$OUT/sweep.log"
{
  grep -h -E "PASSED|FAILED|^rc\(" "$OUT/tests.log"
  grep -h -E "^== |^7b |^model" "$OUT/bench.txt" | cut -c1-200
  tail -3 "$OUT/sweep.log"; cat "$OUT/sweep/status.txt" 2>/dev/null
  sed -n '/## Overall/,/^## [^O]/p' "$OUT/sweep/report.md" 2>/dev/null | head -12
  sed -n '/Mean PSNR/,/^## Mean decode/p' "$OUT/sweep/report.md" 2>/dev/null | head -12
  echo "total $(( $(date +%s) - t0 )) s"
} | tee "$OUT/summary.txt"
