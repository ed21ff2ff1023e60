#!/usr/bin/env bash
# The committed main on the H200 (2026-12-01, after the attention experiments were
# reverted): the attention/policy/backend/Lumina/fault gpu tests, then
# Lumina-mGPT-7B at the paper's batch (16 images; 8 too) at 768 and 512 px,
# dense vs diagonal 95% in one process each (last-step attention stage, per-image
# latency). $OUT: tests.log lumina.txt summary.txt.
set -u
. bench/gpu/bundle_env.sh
use_bundle hb || exit 1
export ARGEN_SERVER_BIN=$BIN/argen_server
t0=$(date +%s); DEADLINE=${DEADLINE:-300}
. bench/gpu/time_guard.sh
{
  for t in kernels_attention_test kernels_policy_test cuda_backend_test lumina_cuda_test gpu_faults_test; do
    stamp "$t"; guarded 60 "$BIN/$t" --gtest_brief=1; echo "rc($t)=$?"
  done
} >"$OUT/tests.log" 2>&1
{
  stamp lumina-768
  guarded 120 "$BIN/argen_bench" --model lumina-768 --batches 8,16 --policies dense,diagonal:0.95 --prompt-len 40 --stage-steps 4
  stamp lumina-512
  guarded 60 "$BIN/argen_bench" --model lumina-512 --batches 8,16 --policies dense,diagonal:0.95 --prompt-len 40 --stage-steps 4
} >"$OUT/lumina.txt" 2>&1
{
  grep -h -E "PASSED|FAILED|^rc\(" "$OUT/tests.log"
  grep -h -E "^== |^lumina-" "$OUT/lumina.txt" | cut -c1-175
  echo "total $(( $(date +%s) - t0 )) s"
} | tee "$OUT/summary.txt"
