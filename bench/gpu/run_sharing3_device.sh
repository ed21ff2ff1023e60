#!/usr/bin/env bash
# Prompt-KV sharing, third device call (WarpMinBlocks: sharing launches of MHA
# bf16 rows at the plain warp kernel's occupancy): the sharing and attention
# gpu tests; argen_bench sharing off / on at 64 images, the full H200 and the
# 48 GB card (4 images a prompt); then the server (run_sharing_server_device.sh).
# $OUT: tests.log bench.txt, the server script's files, summary.txt.
set -u
. bench/gpu/bundle_env.sh
use_bundle "${BUNDLE:-sharing3}" || exit 1
t0=$(date +%s); DEADLINE=${DEADLINE:-250}
. bench/gpu/time_guard.sh
{
  for t in kernels_attention_shared_prompt_test kernels_attention_test cuda_prompt_sharing_test; do
    stamp "$t"; guarded 90 "$BIN/$t" --gtest_brief=1; echo "rc($t)=$?"
  done
} >"$OUT/tests.log" 2>&1
{
  stamp "64 images, 4 a prompt: sharing off / on"
  guarded 40 "$BIN/argen_bench" --model 7b --batches 64 --policies diagonal:0.95:64 --images-per-prompt 4 \
    --prompt-sharing both --stage-steps 4
  stamp "full H200, 4 a prompt: sharing off / on"
  guarded 130 "$BIN/argen_bench" --model 7b --card-memory 139G --max-batch --max-rows 3400 \
    --policies diagonal:0.95:64 --images-per-prompt 4 --prompt-sharing both --stage-steps 4
  stamp "48 GB card, N_r 288, 4 a prompt: sharing off / on"
  guarded 60 "$BIN/argen_bench" --model 7b --card-memory 48G --max-batch --max-rows 1024 \
    --policies diagonal:0.95:288 --images-per-prompt 4 --prompt-sharing both --stage-steps 4
} >"$OUT/bench.txt" 2>&1
ENGINE_SUMMARY=$( {
  grep -h -E "PASSED|FAILED|^rc\(|prompt sharing \]" "$OUT/tests.log"
  grep -h -E "^== |^7b |^card" "$OUT/bench.txt" | cut -c1-190
  echo "engine part $(( $(date +%s) - t0 )) s"
} )
DEADLINE=330 BUNDLE=${BUNDLE:-sharing3} bash bench/gpu/run_sharing_server_device.sh >/dev/null 2>&1
{ echo "$ENGINE_SUMMARY"; cat "$OUT/summary.txt" 2>/dev/null; echo "total $(( $(date +%s) - t0 )) s"; } >"$OUT/all.txt"
cat "$OUT/all.txt"
