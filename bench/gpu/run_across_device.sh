#!/usr/bin/env bash
# Prompt-KV sharing across requests (prompt rows), first device call: the gpu
# tests of the sharing paths (cuda_prompt_sharing_test has the two prompt-row
# cases, never run before), then argen_bench with one image a request, every
# request's caption in its own prompt row and one guidance prompt row for all
# (as share_prompt_kv_across_requests places them) against rows holding their
# own prompts, in one process each: 64 images, the full H200 and the 48 GB card
# (the paper's N_r = 288, dense beside it). $OUT: tests.log bench.txt summary.txt.
set -u
. bench/gpu/bundle_env.sh
use_bundle "${BUNDLE:-across}" || exit 1
t0=$(date +%s); DEADLINE=${DEADLINE:-540}
. bench/gpu/time_guard.sh
{
  for t in cuda_prompt_sharing_test kernels_attention_shared_prompt_test cuda_backend_test gpu_faults_test; do
    [ -x "$BIN/$t" ] || { echo "MISSING $t"; continue; }
    stamp "$t"; guarded 90 "$BIN/$t" --gtest_brief=1; echo "rc($t)=$?"
  done
} >"$OUT/tests.log" 2>&1
{
  stamp "64 images, one a request: own prompts / prompt rows"
  guarded 50 "$BIN/argen_bench" --model 7b --batches 64 --policies diagonal:0.95:64,dense --prompt-sharing off,across \
    --stage-steps 4
  stamp "full H200, one image a request: own prompts / prompt rows"
  guarded 200 "$BIN/argen_bench" --model 7b --card-memory 139G --max-batch --max-rows 3400 \
    --policies diagonal:0.95:64 --prompt-sharing off,across --stage-steps 4
  stamp "48 GB card, N_r 288 and dense: own prompts / prompt rows"
  guarded 120 "$BIN/argen_bench" --model 7b --card-memory 48G --max-batch --max-rows 1024 \
    --policies diagonal:0.95:288,dense --prompt-sharing off,across --stage-steps 4
} >"$OUT/bench.txt" 2>&1
{
  grep -h -E "^MISSING|PASSED|FAILED|^rc\(|prompt (sharing|rows) \]" "$OUT/tests.log"
  grep -h -E "^== |^7b |^card" "$OUT/bench.txt" | cut -c1-190
  echo "total $(( $(date +%s) - t0 )) s"
} | tee "$OUT/summary.txt"
