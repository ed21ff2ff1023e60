# The kernels alone: decode attention at the last step (7B, Lumina 768 px, NextStep-1-14B's 40 query heads over 8 KV
# heads at its N_r, Emu3-Gen 720 px's 32 over 8 at five rows) and one 7B layer's four GEMMs, bf16 and fp8
# (MICRO_GEMMS=0: attention only).
# Sourced by bench/gpu/lab.sh, which reads BASELINE and NEEDS and provides BIN, AB_DIRS, OUT, stamp, guarded.
# shellcheck shell=bash disable=SC2034,SC2154
BASELINE="in-process: the two-pass against the staged and warp attention kernels, bf16 against fp8 GEMMs; BASE_BUNDLE's argen_bench first (when set)"
NEEDS="argen_bench"
run_scenario() {
  local b i
  for i in "${!AB_DIRS[@]}"; do
    b=${AB_DIRS[$i]}
    stamp "${AB_NAMES[$i]}: attention alone"
    guarded 40 "$b/argen_bench" --attention-micro --model 7b --batches 1,4,16,64 --policies diagonal:0.95
    guarded 40 "$b/argen_bench" --attention-micro --model lumina-768 --batches 1,8,16,32 --policies diagonal:0.95 \
      --prompt-len 40
    guarded 40 "$b/argen_bench" --attention-micro --model nextstep-14b --batches 1,16,64 --policies diagonal:0.95 \
      --prompt-len 50
    guarded 60 "$b/argen_bench" --attention-micro --model emu3 --batches 1,16,64 --policies diagonal:0.95:455
    [ "${MICRO_GEMMS:-1}" = 0 ] && continue
    stamp "${AB_NAMES[$i]}: one 7B layer's GEMMs, bf16 / fp8"
    guarded 60 "$b/argen_bench" --model 7b --gemm-micro --gemm-rows 2,16,64,128,256,1024,2816
  done
}
summarize() { grep -h -E "^== |^attention |^gemm " "$1" | cut -c1-240; }
