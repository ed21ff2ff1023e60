#!/usr/bin/env bash
# Issue #13 item 4 on the committed kernels (fp8 attention with 16 codes a lane
# where G <= 2): the gpu tests, random-weight Janus-Pro-7B bf16 KV against fp8
# KV in the same process each (64 images, the full H200 at one row cap, the
# 48 GB card with the paper's N_r), then the quality sweep of fp8 KV on the
# shipped model (dense, diagonal N_r 288 and N_r 64 at 90 and 95%, each in bf16
# and fp8: score, and PSNR against dense bf16).
# $OUT: tests.log bench.txt summary.txt sweep/ (device_sweep.sh's outputs).
# TESTS=0 / BENCH=0 / SWEEP=0 leave a part out (the carry limit may split the
# call: the sweep needs models/argen-scenes-v1 and argen_sweep only).
set -u
. bench/gpu/bundle_env.sh
use_bundle "${BUNDLE:-fp8b}" || exit 1
export ARGEN_SERVER_BIN=$BIN/argen_server
t0=$(date +%s); DEADLINE=${DEADLINE:-585}
. bench/gpu/time_guard.sh
[ "${TESTS:-1}" = 1 ] && {
  for t in kernels_kv_fp8_conversion_test kernels_attention_fp8_test kernels_attention_test kernels_elementwise_test \
           kernels_policy_test cuda_backend_test cuda_pool_sizing_test cuda_vq_decoder_test gpu_faults_test; do
    filter='*'; [ "$t" = cuda_vq_decoder_test ] && [ ! -d models/argen-scenes-v1 ] && filter='-*ShippedModel*'
    stamp "$t"; guarded 90 "$BIN/$t" --gtest_brief=1 --gtest_filter="$filter"; echo "rc($t)=$?"
  done
} >"$OUT/tests.log" 2>&1
B="$BIN/argen_bench --model 7b --prompt-len 50 --stage-steps 4 --out $OUT/bench.jsonl"
[ "${BENCH:-1}" = 1 ] && {
  stamp "64 images"
  guarded 60 $B --batches 64 --policies dense,dense@fp8,diagonal:0.95:64,diagonal:0.95:64@fp8
  stamp "full H200, auto sizing (one row cap for both)"
  guarded 150 $B --auto-sizing --max-batch --policies diagonal:0.95:64,diagonal:0.95:64@fp8
  stamp "48 GB card, N_r = 0.5 L_dec"
  guarded 120 $B --card-memory 48G --max-batch --max-rows 1024 --policies dense,diagonal:0.95,dense@fp8,diagonal:0.95@fp8
} >"$OUT/bench.txt" 2>&1
if [ "${SWEEP:-1}" = 1 ]; then
left=$(( DEADLINE - ($(date +%s) - t0) - 10 ))
stamp "quality sweep, $left s" >>"$OUT/bench.txt"
mkdir -p "$OUT/sweep"
OUT="$OUT/sweep" ARGEN_BIN=$BIN tools/sweep/device_sweep.sh --time-limit "$left" --report-reserve 100 \
  -- --policies dense,dense@fp8,diagonal,diagonal@fp8,diagonal:64,diagonal:64@fp8 --sparsities 90,95 --cfg 3 \
     --skip-invalid >"$OUT/sweep.log" 2>&1
echo "device_sweep rc=$?" >>"$OUT/sweep.log"
fi
{
  grep -h -E "PASSED|FAILED|^rc\(" "$OUT/tests.log"
  grep -h -E "^== |^7b |sizing|^card" "$OUT/bench.txt" | cut -c1-200
  tail -3 "$OUT/sweep.log"; cat "$OUT/sweep/status.txt" 2>/dev/null
  sed -n '/## Overall/,/^## [^O]/p' "$OUT/sweep/report.md" 2>/dev/null | head -12
  sed -n '/Mean PSNR/,/^## Mean decode/p' "$OUT/sweep/report.md" 2>/dev/null | head -12
  echo "total $(( $(date +%s) - t0 )) s"
} | tee "$OUT/summary.txt"
