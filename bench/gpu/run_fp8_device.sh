#!/usr/bin/env bash
# Issue #13 item 4, FP8 KV on the H200: the fp8 gpu tests (conversion against
# CUDA's, append, attention over fp8 and mixed rows, the backend against the
# CPU's fp8 reference) and the bf16 ones they sit beside; then random-weight
# Janus-Pro-7B, bf16 KV against fp8 KV in the same process each: small
# batches, the full H200 (auto sizing: the same row cap for both; then fp8
# with the rows its KV allows), and the 48 GB card with the paper's N_r.
# $OUT: tests.log bench.txt summary.txt.
set -u
. bench/gpu/bundle_env.sh
use_bundle fp8 || exit 1
t0=$(date +%s); DEADLINE=${DEADLINE:-575}
. bench/gpu/time_guard.sh
{
  for t in kernels_kv_fp8_conversion_test kernels_attention_fp8_test kernels_elementwise_test kernels_attention_test \
           cuda_backend_test cuda_pool_sizing_test; do
    stamp "$t"; guarded 90 "$BIN/$t" --gtest_brief=1; echo "rc($t)=$?"
  done
  "$BIN/cuda_backend_test" --gtest_filter='*fp8*' 2>&1 | grep -E "^\[ tests"
} >"$OUT/tests.log" 2>&1
B="$BIN/argen_bench --model 7b --prompt-len 50 --stage-steps 4 --out $OUT/bench.jsonl"
{
  stamp "small batches"
  guarded 150 $B --batches 16,64 --policies dense,dense@fp8,diagonal:0.95:64,diagonal:0.95:64@fp8
  stamp "full H200, auto sizing (one row cap for both)"
  guarded 200 $B --auto-sizing --max-batch --policies diagonal:0.95:64,diagonal:0.95:64@fp8
  stamp "full H200, fp8 with the rows its KV allows"
  guarded 150 $B --card-memory 139G --max-batch --max-rows 4480 --policies diagonal:0.95:64@fp8
  stamp "48 GB card, N_r = 0.5 L_dec"
  guarded 150 $B --card-memory 48G --max-batch --max-rows 1024 --policies dense,diagonal:0.95,dense@fp8,diagonal:0.95@fp8
} >"$OUT/bench.txt" 2>&1
{
  grep -h -E "PASSED|FAILED|^rc\(|^\[ tests" "$OUT/tests.log"
  grep -h -E "^== |^7b |sizing|^card" "$OUT/bench.txt" | cut -c1-200
  echo "total $(( $(date +%s) - t0 )) s"
} | tee "$OUT/summary.txt"
