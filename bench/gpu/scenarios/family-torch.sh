# LlamaGen c2i (XL 256 px at 1/16/64 images, XL 384 px at the authors' 8), Emu3-Gen 720 px and NextStep-1-14B: argen_bench against the careful PyTorch loop, same call.
# Each model: argen_bench dense and diagonal 95% at the family's N_r (family-engine.sh's family_policy), then its
# careful PyTorch loop on the same shape and batches: torch_janus_loop.py (bf16, CUDA graphs) for the code models,
# torch_nextstep_loop.py (bf16, static cache, a CUDA graph per KV bucket for the decoder step and one for the flow
# head's 50-step sampler, CFG on the velocity) for nextstep-14b; LlamaGen's published vLLM-fork figures (A100) are
# printed beside. TORCH_FAMILY_MODELS: argen_bench --model names (default "llamagen-xl-256 llamagen-xl-384 emu3";
# nextstep-14b fits a call of its own: TORCH_FAMILY_MODELS=nextstep-14b); TORCH_FAMILY_BATCHES_<model, dashes as _>:
# its batches (defaults: LlamaGen 1,16,64, at 384 px 8; emu3 1: emu3 at 16 images fits a call of its own,
# TORCH_FAMILY_MODELS=emu3 TORCH_FAMILY_BATCHES_emu3=16; nextstep-14b 1,16,64); TORCH_FAMILY_GUARD: seconds an emu3
# or a nextstep-14b run may take (default 300 for emu3; 200 for nextstep-14b, each side: the loop's 14B random
# weights on the GPU, its graph captures and 3 x 1,023 steps); TORCH_FAMILY_NEXTSTEP_TOKENS: the image tokens the
# NextStep loop times (default all 1,024; fewer: its steps spread over the image and the batch's time extrapolated,
# labelled so). NextStep's argen_bench runs get a 40 GB KV pool, as nextstep.sh's lone runs (64 dense images take
# ~27 GB), and print their split lines (the head alone against the step) beside the loop's.
# Sourced by bench/gpu/lab.sh, which reads BASELINE and NEEDS and provides BIN, AB_DIRS, OUT, stamp, guarded.
# shellcheck shell=bash disable=SC2034,SC2154
# family_policy comes from family-engine.sh (one table of the families' N_r); this file then sets its own
# BASELINE, NEEDS, run_scenario and summarize over that file's.
# shellcheck source=bench/gpu/scenarios/family-engine.sh
. bench/gpu/scenarios/family-engine.sh
BASELINE="bench/gpu/torch_janus_loop.py / torch_nextstep_loop.py (bf16, CUDA graphs) after argen_bench, same call, same GPU; LlamaGen's published vLLM figures (A100) beside"
NEEDS="argen_bench"
torch_family_batches() {  # MODEL
  local var="TORCH_FAMILY_BATCHES_${1//-/_}"
  if [ -n "${!var:-}" ]; then echo "${!var}"; return; fi
  case $1 in
    emu3) echo 1 ;;
    llamagen-*-384) echo 8 ;;  # the authors' published batch: 8 classes
    *) echo 1,16,64 ;;
  esac
}
torch_family_guard() {  # MODEL
  case $1 in
    emu3) echo "${TORCH_FAMILY_GUARD:-300}" ;;
    nextstep-*) echo "${TORCH_FAMILY_GUARD:-200}" ;;
    *) echo 120 ;;
  esac
}
# FoundationVision/LlamaGen autoregressive/serve/README.md, "Comparison (A100)": their sample_c2i.py loop against
# their vLLM 0.4.1 fork (serve/sample_c2i.py), 8 class labels (16 sequences with CFG 4.0), 384 px (576 tokens),
# bf16, top-k 2000; seconds of "gpt sampling" (prefill and decode, not the VQ decoder).
published_llamagen() {
  local row
  for row in "GPT-B 111M 7.80 2.39" "GPT-L 343M 13.72 3.48" "GPT-XL 775M 19.76 4.84" "GPT-XXL 1.4B 26.38 6.36" \
    "GPT-3B 3.1B 14.73 6.26"; do
    # shellcheck disable=SC2086  # four fields
    set -- $row
    echo "published (A100, not this GPU): LlamaGen c2i $1 ($2) 384 px, 8 images: their PyTorch loop $3 s, their" \
      "vLLM fork $4 s a batch ($(awk -v a="$3" -v b="$4" 'BEGIN { printf "%.2fx", a / b }'))"
  done
}
run_scenario() {
  local m p b g len models=${TORCH_FAMILY_MODELS:-llamagen-xl-256 llamagen-xl-384 emu3}
  case $models in *llamagen-*) published_llamagen ;; esac
  for m in $models; do
    p=$(family_policy "$m")
    b=$(torch_family_batches "$m")
    g=$(torch_family_guard "$m")
    len=50  # emu3: argen_bench's prompt (its guidance row 52; the loop's rows are 52); nextstep: argen's and the loop's rows
    case $m in llamagen-*) len=1 ;; esac  # c2i: the class token
    stamp "candidate: argen_bench $m, $b images, dense and $p"
    case $m in
      nextstep-*)
        guarded "$g" "$BIN/argen_bench" --model "$m" --batches "$b" --policies "dense,$p" --prompt-len "$len" \
          --kv-budget 40G
        stamp "careful PyTorch loop (bf16): $m, $b images"
        guarded "$g" "$PYTHON" bench/gpu/torch_nextstep_loop.py --batches "$b" --prompt-len "$len" \
          --tokens "${TORCH_FAMILY_NEXTSTEP_TOKENS:-1024}" ;;
      *)
        guarded "$g" "$BIN/argen_bench" --model "$m" --batches "$b" --policies "dense,$p" --prompt-len "$len"
        stamp "careful PyTorch loop (bf16): $m, $b images"
        guarded "$g" "$PYTHON" bench/gpu/torch_janus_loop.py --model "$m" --batches "$b" ;;
    esac
  done
}
# Both print: model policy images prefill_s decode_s step_ms [last_ms | head_ms] img/s | ...; a batch's latency
# is prefill_s + decode_s, img/s the field before "|" (one image's latency: the 1-image line's). Ratios: the loop's
# batch latency / argen's (> 1: argen faster); a NextStep loop line that timed fewer steps says "extrapolated".
# NextStep's split lines (argen's head alone against its step; the loop's decoder / head split) are kept as printed.
summarize() {
  grep -h -E "^== |^published .*GPT-XL " "$1" | cut -c1-220
  grep -h "^split nextstep" "$1" | cut -c1-260
  awk '$1 ~ /^(llamagen|emu3|nextstep)/ && $3 ~ /^[0-9]+$/ {
         ips = ""; for (i = 4; i <= NF; i++) if ($i == "|") { ips = $(i - 1); break }
         if (ips == "") next
         k = $1 " " $3
         if (!(k in seen)) { seen[k] = 1; keys[++n] = k }
         lat[k, $2] = $4 + $5; rate[k, $2] = ips
         if ($2 == "torch-loop" && $0 ~ / extrapolated/) extra[k] = 1
         if ($2 != "torch-loop" && !((k, $2) in known)) { known[k, $2] = 1; np[k]++; pol[k, np[k]] = $2 } }
       END { for (j = 1; j <= n; j++) { k = keys[j]; split(k, w, " "); loop = lat[k, "torch-loop"]
               line = sprintf("%s, %s images:", w[1], w[2])
               if (loop > 0) line = line sprintf(" loop %.2f s a batch (%.2f img/s%s);", loop, rate[k, "torch-loop"],
                                                 (k in extra) ? ", extrapolated from its timed steps" : "")
               else line = line " loop not measured;"
               for (q = 1; q <= np[k]; q++) { p = pol[k, q]
                 line = line sprintf(" %s %.2f s (%.2f img/s", p, lat[k, p], rate[k, p])
                 if (loop > 0 && lat[k, p] > 0) line = line sprintf(", %.2fx the loop", loop / lat[k, p])
                 line = line ")" (q < np[k] ? "," : "") }
               print line
               if (w[1] == "llamagen-xl-384" && w[2] == 8)
                 print "  beside it, published for GPT-XL 384 px, 8 images on an A100 (not this H200: compare ratios," \
                       " not seconds): their PyTorch loop 19.76 s, their vLLM fork 4.84 s a batch (4.08x)" } }' "$1"
}
