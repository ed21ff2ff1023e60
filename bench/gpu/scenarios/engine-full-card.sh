# The full H200 (139 GB) at diagonal 95% N_r 64, lone images reading shared prompt rows, bf16 and fp8 weights.
# FULL_CARD_POLICIES adds policies (e.g. diagonal:0.95:64,dense: dense at the full card, ~+100 s).
# BENCH_FLAGS: more argen_bench flags for every run (e.g. --attention-kernel two-pass).
# FULL_CARD_WEIGHTS: the weight dtypes (default auto,fp8). FULL_CARD_WINDOWS: parallel windows, a run each (default
# "0"; "0 8": sequential against image rows in flight at the full card, with the stage columns: #28).
# Sourced by bench/gpu/lab.sh, which reads BASELINE and NEEDS and provides BIN, AB_DIRS, OUT, stamp, guarded.
# shellcheck shell=bash disable=SC2034,SC2154
BASELINE="BASE_BUNDLE's argen_bench, same flags, first (when set)"
NEEDS="argen_bench"
run_scenario() {
  local b i w
  for i in "${!AB_DIRS[@]}"; do
    b=${AB_DIRS[$i]}
    for w in ${FULL_CARD_WINDOWS:-0}; do
      stamp "${AB_NAMES[$i]}: full H200, ${FULL_CARD_POLICIES:-diagonal:0.95:64}, parallel window $w"
      # shellcheck disable=SC2086  # BENCH_FLAGS is a list of flags
      guarded 240 "$b/argen_bench" ${BENCH_FLAGS:-} --model 7b --card-memory 139G --max-batch --max-rows 4096 \
        --policies "${FULL_CARD_POLICIES:-diagonal:0.95:64}" --prompt-sharing across \
        --weight-dtype "${FULL_CARD_WEIGHTS:-auto,fp8}" --parallel-window "$w"
    done
  done
}
summarize() { grep -h -E "^== |^7b |^card|^parallel " "$1" | cut -c1-200; }
