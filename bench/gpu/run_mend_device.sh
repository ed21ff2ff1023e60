#!/usr/bin/env bash
# The fourth session's kernel review mend, re-applied on the sharing kernels
# (AccumulateValues zeroes and sums the warp's key slots itself; the warp
# kernel's argmin goes through MinEntry / WarpArgmin): the attention and
# backend gpu tests, and 7B at 64 images against the figures of the calls
# before it (same registers per kernel: ptxas -v). $OUT: tests.log bench.txt summary.txt.
set -u
. bench/gpu/bundle_env.sh
use_bundle "${BUNDLE:-mend2}" || exit 1
t0=$(date +%s); DEADLINE=${DEADLINE:-200}
. bench/gpu/time_guard.sh
{
  for t in kernels_attention_test kernels_attention_fp8_test kernels_attention_shared_prompt_test cuda_backend_test \
           cuda_prompt_sharing_test; do
    stamp "$t"; guarded 60 "$BIN/$t" --gtest_brief=1; echo "rc($t)=$?"
  done
} >"$OUT/tests.log" 2>&1
{
  stamp "64 images: one a prompt, and 4 a prompt sharing off / on"
  guarded 40 "$BIN/argen_bench" --model 7b --batches 64 --policies diagonal:0.95:64,diagonal:0.95:64@fp8 --stage-steps 4
  guarded 40 "$BIN/argen_bench" --model 7b --batches 64 --policies diagonal:0.95:64 --images-per-prompt 4 \
    --prompt-sharing both --stage-steps 4
} >"$OUT/bench.txt" 2>&1
{
  grep -h -E "PASSED|FAILED|^rc\(|prompt sharing \]" "$OUT/tests.log"
  grep -h -E "^== |^7b " "$OUT/bench.txt" | cut -c1-175
  echo "total $(( $(date +%s) - t0 )) s"
} | tee "$OUT/summary.txt"
