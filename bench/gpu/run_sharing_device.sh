#!/usr/bin/env bash
# Prompt-KV sharing within a request (#13 item 3), first device call: every gpu
# test the change touches, then argen_bench A/Bs in one process each:
#   1. 64 images, one image a prompt: ab48247 (before the change, argen_bench_base)
#      against this tree, so the kernels' shared-prompt select costs what it costs;
#   2. 64 images, 4 a prompt: sharing off / on (same batch: attention and prefill);
#   3. the full H200 (--card-memory 139G, rows up to 3,400), 4 a prompt, diagonal
#      95% N_r 64: sharing off / on (the batch sharing lets fit).
# $OUT: tests.log bench.txt summary.txt.
set -u
. bench/gpu/bundle_env.sh
use_bundle "${BUNDLE:-sharing}" || exit 1
t0=$(date +%s); DEADLINE=${DEADLINE:-560}
. bench/gpu/time_guard.sh
{
  for t in kernels_attention_shared_prompt_test kernels_attention_test kernels_attention_fp8_test \
           kernels_elementwise_test cuda_prompt_sharing_test cuda_backend_test cuda_stack_switches_test; do
    stamp "$t"; guarded 90 "$BIN/$t" --gtest_brief=1; echo "rc($t)=$?"
  done
} >"$OUT/tests.log" 2>&1
{
  stamp "64 images, 1 a prompt: before (ab48247)"
  guarded 40 "$BIN/argen_bench_base" --model 7b --batches 64 --policies dense,diagonal:0.95:64 --stage-steps 4
  stamp "64 images, 1 a prompt: after"
  guarded 40 "$BIN/argen_bench" --model 7b --batches 64 --policies dense,diagonal:0.95:64 --stage-steps 4
  stamp "64 images, 4 a prompt: sharing off / on"
  guarded 70 "$BIN/argen_bench" --model 7b --batches 64 --policies dense,diagonal:0.95:64 --images-per-prompt 4 \
    --prompt-sharing both --stage-steps 4
  stamp "full H200, 4 a prompt: sharing off / on"
  guarded 240 "$BIN/argen_bench" --model 7b --card-memory 139G --max-batch --max-rows 3400 \
    --policies diagonal:0.95:64 --images-per-prompt 4 --prompt-sharing both --stage-steps 4
} >"$OUT/bench.txt" 2>&1
{
  grep -h -E "PASSED|FAILED|^rc\(|prompt sharing \]" "$OUT/tests.log"
  grep -h -E "^== |^7b |^card" "$OUT/bench.txt" | cut -c1-190
  echo "total $(( $(date +%s) - t0 )) s"
} | tee "$OUT/summary.txt"
