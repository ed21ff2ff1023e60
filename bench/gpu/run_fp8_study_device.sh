#!/usr/bin/env bash
# The committed main after the warp kernel's auto rule (<= 256 keys): the
# attention and backend gpu tests; fp8 KV quality against bf16 image by image
# (tools/sweep/device_kv_study.sh: the same grid, prompts and seeds swept with
# --kv-cache-dtype auto and fp8, compared pair by pair); then random-weight
# Janus-Pro-7B throughput under the auto kernel choice, with the two-pass
# kernel as the same-call baseline, bf16 and fp8 KV, 64 images, the full H200
# and the 48 GB card. $OUT: tests.log kv/ bench.txt summary.txt.
set -u
. bench/gpu/bundle_env.sh
use_bundle "${BUNDLE:-study}" || exit 1
t0=$(date +%s); DEADLINE=${DEADLINE:-575}
. bench/gpu/time_guard.sh
{
  for t in kernels_attention_test kernels_attention_fp8_test kernels_policy_test cuda_backend_test; do
    stamp "$t"; guarded 90 "$BIN/$t" --gtest_brief=1; echo "rc($t)=$?"
  done
} >"$OUT/tests.log" 2>&1
mkdir -p "$OUT/kv"
stamp "kv study" >"$OUT/kv.log"
OUT="$OUT/kv" ARGEN_BIN=$BIN KV_POLICIES=dense,diagonal,diagonal:64 KV_SWEEP_ARGS="--cfg 3" KV_TIME_LIMIT=${KV_TIME:-230} \
  KV_REPORT_RESERVE=110 tools/sweep/device_kv_study.sh >>"$OUT/kv.log" 2>&1
echo "device_kv_study rc=$?" >>"$OUT/kv.log"
B="$BIN/argen_bench --model 7b --prompt-len 50 --stage-steps 4 --out $OUT/bench.jsonl"
{
  stamp "auto kernel choice: 64 images"
  guarded 40 $B --batches 64 --policies dense,dense@fp8,diagonal:0.95:64,diagonal:0.95:64@fp8
  stamp "auto kernel choice: full H200, auto sizing"
  guarded 110 $B --auto-sizing --max-batch --policies diagonal:0.95:64,diagonal:0.95:64@fp8
  stamp "two-pass kernel (baseline): full H200, auto sizing"
  guarded 60 $B --attention-kernel two-pass --auto-sizing --max-batch --policies diagonal:0.95:64
  stamp "auto kernel choice: 48 GB card, N_r = 0.5 L_dec"
  guarded 90 $B --card-memory 48G --max-batch --max-rows 1024 --policies dense,diagonal:0.95,dense@fp8,diagonal:0.95@fp8
} >"$OUT/bench.txt" 2>&1
{
  grep -h -E "PASSED|FAILED|^rc\(" "$OUT/tests.log"
  tail -2 "$OUT/kv.log"; head -40 "$OUT/kv/kv_study.md" 2>/dev/null
  grep -h -E "^== |^7b |^card" "$OUT/bench.txt" | cut -c1-200
  echo "total $(( $(date +%s) - t0 )) s"
} | tee "$OUT/summary.txt"
