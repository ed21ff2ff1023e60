# One image's latency for every family (random weights, published shapes, dense), the decode GEMMs of 1-4 rows on
# the skinny kernel (kernels/skinny_linear.h, an A/B option) against cuBLAS (the engine's default), then 7B's and NextStep-14B's
# layer GEMMs alone at 2 / 4 / 16 rows. ONE_IMAGE_MODELS: argen_bench --model names (default "7b llamagen-xl-512
# anole-512 lumina-768 nextstep-14b emu3"); the small ones run 1 and 2 images, lumina-768, nextstep-14b and emu3 one.
# ONE_IMAGE_GUARD: seconds one argen_bench run may take (default 150: emu3's 8,193 steps take ~60 s).
# Sourced by bench/gpu/lab.sh, which reads BASELINE and NEEDS and provides BIN, OUT, stamp, guarded.
# shellcheck shell=bash disable=SC2034,SC2154
BASELINE="--skinny-gemm off (cuBLAS at every row count), the same argen_bench binary, run just before"
NEEDS="argen_bench"
one_image_prompt_len() {  # MODEL: the prompt its requests have (family-engine.sh's lengths)
  case $1 in
    llamagen-*) echo 120 ;;
    anole-512) echo 32 ;;
    lumina-*) echo 40 ;;
    *) echo 50 ;;
  esac
}
one_image_batches() {  # MODEL
  case $1 in
    lumina-* | nextstep-* | emu3) echo 1 ;;
    *) echo 1,2 ;;
  esac
}
run_scenario() {
  local m sk
  for m in ${ONE_IMAGE_MODELS:-7b llamagen-xl-512 anole-512 lumina-768 nextstep-14b emu3}; do
    for sk in off on; do
      stamp "$m: skinny $sk"
      guarded "${ONE_IMAGE_GUARD:-150}" "$BIN/argen_bench" --model "$m" --batches "$(one_image_batches "$m")" \
        --policies dense --prompt-len "$(one_image_prompt_len "$m")" --skinny-gemm "$sk" --stage-steps 0
    done
  done
  for m in 7b nextstep-14b; do
    stamp "$m: one layer's GEMMs alone"
    guarded 60 "$BIN/argen_bench" --model "$m" --gemm-micro --gemm-rows 2,4,16
  done
}
# argen_bench lines: model policy images prefill_s decode_s step_ms last_ms img/s | ... The ratio is cuBLAS's
# (skinny off, the block before) over the skinny kernel's, per model and batch.
summarize() {
  grep -h -E "^== |^gemm " "$1" | cut -c1-260
  awk '/^== / { sk = ($0 ~ /skinny on/) ? "on" : "off" }
       $9 == "|" && $3 ~ /^[0-9]+$/ { print sk ": " $0; k = $1 " @" $3
         if (sk == "off") { off[k] = $4 + $5; step_off[k] = $6 }
         else if (k in off) printf "%s: one batch %.2f s (cuBLAS) -> %.2f s (skinny): %.2fx; step %.3f -> %.3f ms\n",
                                   k, off[k], $4 + $5, off[k] / ($4 + $5), step_off[k], $6 }' "$1" | cut -c1-220
}
