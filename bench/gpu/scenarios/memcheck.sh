# compute-sanitizer memcheck over the kernel tests (attention, policy, elementwise, VQ NHWC kernels).
# Sourced by bench/gpu/lab.sh, which reads BASELINE and NEEDS and provides BIN, AB_DIRS, OUT, stamp, guarded.
# shellcheck shell=bash disable=SC2034,SC2154
BASELINE="none: 0 errors (ERROR SUMMARY) and every test passing under the tool"
NEEDS="kernels_attention_test kernels_policy_test"
run_scenario() {
  local cs t
  cs=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)}
  for t in kernels_attention_test kernels_policy_test kernels_elementwise_test kernels_vq_nhwc_test; do
    [ -x "$BIN/$t" ] || continue
    stamp "memcheck $t"
    guarded 150 "$cs" --tool memcheck --error-exitcode 9 "$BIN/$t" --gtest_brief=1
    echo "rc(memcheck $t)=$?"
  done
}
summarize() { grep -h -E "^== |ERROR SUMMARY|PASSED|FAILED|^rc\(" "$1" | cut -c1-200; }
