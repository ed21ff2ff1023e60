# argen_bench 7B at 1/16/64/128 images, dense and diagonal 95% N_r 64, bf16 and fp8 weights.
# BENCH_FLAGS: more argen_bench flags for every run (e.g. --attention-kernel two-pass).
# Sourced by bench/gpu/lab.sh, which reads BASELINE and NEEDS and provides BIN, AB_DIRS, OUT, stamp, guarded.
# shellcheck shell=bash disable=SC2034,SC2154
BASELINE="BASE_BUNDLE's argen_bench, same flags, first (when set)"
NEEDS="argen_bench"
run_scenario() {
  local b i
  for i in "${!AB_DIRS[@]}"; do
    b=${AB_DIRS[$i]}
    stamp "${AB_NAMES[$i]}: 7B 1/16/64/128 images"
    # shellcheck disable=SC2086  # BENCH_FLAGS is a list of flags
    guarded 170 "$b/argen_bench" ${BENCH_FLAGS:-} --model 7b --batches 1,16,64,128 --policies dense,diagonal:0.95:64 \
      --weight-dtype auto,fp8
  done
}
summarize() { grep -h -E "^== |^7b " "$1" | cut -c1-200; }
