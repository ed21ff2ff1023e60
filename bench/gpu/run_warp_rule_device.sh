#!/usr/bin/env bash
# The warp kernel's auto rule with its pair threshold (kWarpAutoPairsPerSm),
# on the committed main: the attention tests, then the shapes on both sides of
# the threshold under auto and under the two-pass kernel in the same call:
# Janus-Pro-7B diagonal 95% at 16 images (1,024 pairs: two-pass) and 64
# (4,096: warp), Lumina-mGPT-7B 768 px at 16 (two-pass). $OUT: tests.log bench.txt summary.txt.
set -u
. bench/gpu/bundle_env.sh
use_bundle "${BUNDLE:-rule}" || exit 1
t0=$(date +%s); DEADLINE=${DEADLINE:-200}
. bench/gpu/time_guard.sh
{
  for t in kernels_attention_choice_test kernels_attention_test cuda_backend_test; do
    stamp "$t"; guarded 60 "$BIN/$t" --gtest_brief=1; echo "rc($t)=$?"
  done
} >"$OUT/tests.log" 2>&1
{
  for k in auto two-pass; do
    stamp "janus, $k"
    guarded 40 "$BIN/argen_bench" --model 7b --attention-kernel $k --batches 16,64 --policies diagonal:0.95,diagonal:0.95@fp8 --stage-steps 4
    stamp "lumina-768, $k"
    guarded 40 "$BIN/argen_bench" --model lumina-768 --attention-kernel $k --batches 16 --policies diagonal:0.95 --prompt-len 40 --stage-steps 4
  done
} >"$OUT/bench.txt" 2>&1
{
  grep -h -E "PASSED|FAILED|^rc\(" "$OUT/tests.log"
  grep -h -E "^== |^(lumina-|7b )" "$OUT/bench.txt" | cut -c1-175
  echo "total $(( $(date +%s) - t0 )) s"
} | tee "$OUT/summary.txt"
