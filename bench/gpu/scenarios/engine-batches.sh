# argen_bench 7B at 1/16/64/128 images, dense and diagonal 95% N_r 64, bf16 and fp8 weights.
# BENCH_FLAGS: more argen_bench flags for every run (e.g. --attention-kernel two-pass).
# BENCH_BATCHES: the batches (default 1,16,64,128). BENCH_KERNELS: attention kernels, a run each in the same call
# (e.g. "two-pass auto": kAuto's choice against the two-pass kernel; default: one run, the engine's choice).
# Sourced by bench/gpu/lab.sh, which reads BASELINE and NEEDS and provides BIN, AB_DIRS, OUT, stamp, guarded.
# shellcheck shell=bash disable=SC2034,SC2154
BASELINE="BASE_BUNDLE's argen_bench, same flags, first (when set)"
NEEDS="argen_bench"
run_scenario() {
  local b i k kernel_flag
  for i in "${!AB_DIRS[@]}"; do
    b=${AB_DIRS[$i]}
    for k in ${BENCH_KERNELS:--}; do
      kernel_flag=()
      [ "$k" != - ] && kernel_flag=(--attention-kernel "$k")
      stamp "${AB_NAMES[$i]}: 7B ${BENCH_BATCHES:-1,16,64,128} images, attention kernel ${k/#-/default}"
      # shellcheck disable=SC2086  # BENCH_FLAGS is a list of flags
      guarded 170 "$b/argen_bench" ${BENCH_FLAGS:-} "${kernel_flag[@]}" --model 7b --batches "${BENCH_BATCHES:-1,16,64,128}" \
        --policies dense,diagonal:0.95:64 --weight-dtype auto,fp8
    done
  done
}
summarize() { grep -h -E "^== |^7b |^model " "$1" | cut -c1-200; }
