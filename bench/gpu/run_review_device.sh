#!/usr/bin/env bash
# After the review mend of the CUDA backend's prefill plan and admission check
# (184f7f5): the backend's gpu tests (sharing, CPU agreement, stack switches,
# auto sizing, Lumina's unequal rows, fault injection). $OUT: tests.log summary.txt.
set -u
. bench/gpu/bundle_env.sh
use_bundle "${BUNDLE:-rv}" || exit 1
export ARGEN_SERVER_BIN=$BIN/argen_server
t0=$(date +%s); DEADLINE=${DEADLINE:-200}
. bench/gpu/time_guard.sh
{
  for t in cuda_prompt_sharing_test cuda_backend_test cuda_stack_switches_test cuda_auto_sizing_test lumina_cuda_test \
           gpu_faults_test; do
    stamp "$t"; guarded 60 "$BIN/$t" --gtest_brief=1; echo "rc($t)=$?"
  done
} >"$OUT/tests.log" 2>&1
grep -h -E "PASSED|FAILED|^rc\(|prompt sharing \]" "$OUT/tests.log" | tee "$OUT/summary.txt"
