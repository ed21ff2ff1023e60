#!/usr/bin/env bash
# After the attention kernels' shared key loops were factored out (ScoreKeys,
# AccumulateValues; same math): the attention and backend gpu tests, and the
# figures they must keep: 7B at 64 images (auto and two-pass) and diagonal 95%
# on the full H200 (auto: the warp kernel). $OUT: tests.log bench.txt summary.txt.
set -u
. bench/gpu/bundle_env.sh
use_bundle "${BUNDLE:-refactor}" || exit 1
t0=$(date +%s); DEADLINE=${DEADLINE:-200}
. bench/gpu/time_guard.sh
{
  for t in kernels_attention_choice_test kernels_attention_test kernels_attention_fp8_test cuda_backend_test; do
    stamp "$t"; guarded 60 "$BIN/$t" --gtest_brief=1; echo "rc($t)=$?"
  done
} >"$OUT/tests.log" 2>&1
{
  stamp "64 images, auto"
  guarded 40 "$BIN/argen_bench" --model 7b --batches 64 --policies dense,diagonal:0.95:64,diagonal:0.95:64@fp8 --stage-steps 4
  stamp "64 images, two-pass"
  guarded 25 "$BIN/argen_bench" --model 7b --attention-kernel two-pass --batches 64 --policies diagonal:0.95:64 --stage-steps 4
  stamp "full H200, auto"
  guarded 80 "$BIN/argen_bench" --model 7b --auto-sizing --max-batch --policies diagonal:0.95:64 --stage-steps 4
} >"$OUT/bench.txt" 2>&1
{
  grep -h -E "PASSED|FAILED|^rc\(" "$OUT/tests.log"
  grep -h -E "^== |^7b " "$OUT/bench.txt" | cut -c1-175
  echo "total $(( $(date +%s) - t0 )) s"
} | tee "$OUT/summary.txt"
