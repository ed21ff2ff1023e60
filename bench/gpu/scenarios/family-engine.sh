# The wave-3 families' engine figures (random weights, published shapes): last-step attention at 16 images, one
# image and 16 images end to end, and the 48 GB card's max batch, dense against diagonal 95% at the family's N_r.
# FAMILY_MODELS: argen_bench --model names (default "emu3 llamagen-xl-512"; also anole-512); FAMILY_STEPS: which of
# "micro lone 48g full" (default "micro lone 48g"; full: the whole H200, auto sizing: long for emu3's 8,193 steps);
# FAMILY_BATCHES: lone's batches (default 1,16); FAMILY_GUARD: seconds a lone or 48g run may take (default 240);
# FAMILY_FULL_GUARD: seconds a full run (both policies) may take (default 300; an emu3 or emu3-512 full run, ~850 or
# ~1,200 diagonal images, is longer than one device call unless projected: FAMILY_PROJECT).
# FAMILY_PROJECT: a full run's bounded-memory policies decode that many steps and project the rest from their steady
# step (argen_bench --project-bounded; the line says +projN; dense runs whole): emu3 at the whole card in one call.
# FAMILY_POLICY_<model, dashes as _>: the sparse policies, comma-separated (default diagonal:0.95:<five image rows>).
# FAMILY_BENCH_ARGS: more argen_bench flags for the lone, 48g and full steps (e.g. --attention-kernel one-pass).
# Sourced by bench/gpu/lab.sh, which reads BASELINE and NEEDS and provides BIN, AB_DIRS, OUT, stamp, guarded.
# shellcheck shell=bash disable=SC2034,SC2154
BASELINE="dense in the same argen_bench process, same shape and weights (the ratios of issues #29 and #30)"
NEEDS="argen_bench"
# The family's default sparse policy at 95%: N_r of five image rows (emu3 720 px: 91 a row, emu3-512 65; LlamaGen: 32 at 512 px,
# 16 at 256 px; Anole 512 px: 32, no row breaks), the prompt length its requests have (emu3: argen_bench's own;
# LlamaGen t2i: 120 caption slots; Anole: <s>, a one-sentence caption of ~29 BPE tokens, <reserved08706>,
# <racm3:break>: 32).
family_policy() {  # MODEL
  local var="FAMILY_POLICY_${1//-/_}"
  if [ -n "${!var:-}" ]; then echo "${!var}"; return; fi
  case $1 in
    emu3) echo diagonal:0.95:455 ;;
    emu3-512) echo diagonal:0.95:325 ;;
    llamagen-*-512 | anole-512) echo diagonal:0.95:160 ;;
    llamagen-*-384) echo diagonal:0.95:120 ;;
    llamagen-*-256) echo diagonal:0.95:80 ;;
    *) echo diagonal:0.95 ;;
  esac
}
family_prompt_len() {  # MODEL
  case $1 in
    llamagen-*-512 | llamagen-*-256) echo "${FAMILY_PROMPT_LEN:-120}" ;;
    anole-512) echo "${FAMILY_PROMPT_LEN:-32}" ;;
    *) echo "${FAMILY_PROMPT_LEN:-50}" ;;
  esac
}
run_scenario() {
  local m p len step extra
  read -r -a extra <<<"${FAMILY_BENCH_ARGS:-}"
  for m in ${FAMILY_MODELS:-emu3 llamagen-xl-512}; do
    p=$(family_policy "$m")
    len=$(family_prompt_len "$m")
    for step in ${FAMILY_STEPS:-micro lone 48g}; do
      case $step in
        micro)
          stamp "candidate: $m, last-step attention, 16 images, $p"
          guarded 60 "$BIN/argen_bench" --attention-micro --model "$m" --batches 16 --policies "$p" --prompt-len "$len" ;;
        lone)
          stamp "candidate: $m, ${FAMILY_BATCHES:-1,16} images"
          guarded "${FAMILY_GUARD:-240}" "$BIN/argen_bench" --model "$m" --batches "${FAMILY_BATCHES:-1,16}" --policies "dense,$p" --prompt-len "$len" --stage-steps 4 \
            "${extra[@]}" ;;
        48g)
          stamp "candidate: $m, 48 GB card, max batch"
          guarded "${FAMILY_GUARD:-240}" "$BIN/argen_bench" --model "$m" --card-memory 48G --max-batch --max-rows 1024 \
            --policies "dense,$p" --prompt-len "$len" "${extra[@]}" ;;
        full)
          stamp "candidate: $m, full H200, auto sizing, max batch"
          guarded "${FAMILY_FULL_GUARD:-300}" "$BIN/argen_bench" --model "$m" --auto-sizing --max-batch --policies "dense,$p" \
            --prompt-len "$len" --stage-steps 0 ${FAMILY_PROJECT:+--project-bounded "$FAMILY_PROJECT"} "${extra[@]}" ;;
        *) echo "family-engine: no step $step (micro lone 48g full)" ;;
      esac
    done
  done
}
# argen_bench lines: model policy images prefill_s decode_s step_ms last_ms img/s | embed plan qkv attention
# observe apply o_proj ffn head indexing kv_MB/img keys. Ratios are dense / diagonal of the same block and batch.
summarize() {
  grep -h -E "^== |^attention .*two-pass|sizing|^projected" "$1" | cut -c1-220
  awk '/^== / { blk = $0 } $9 == "|" && $3 ~ /^[0-9]+$/ { print }' "$1" | cut -c1-200
  awk '/^== / { blk = $0 }
       $9 == "|" && $3 ~ /^[0-9]+$/ { p = $2
         k = (blk ~ /max batch/) ? blk : blk " @" $3
         if (!(k in seen)) { seen[k] = 1; keys[++n] = k }
         if (!((k, p) in img)) { np[k]++; pol[k, np[k]] = p }
         img[k, p] = $3; ips[k, p] = $8; lat[k, p] = $4 + $5; att[k, p] = $13 }
       END { for (i = 1; i <= n; i++) { k = keys[i]; split(k, w, ": ")
               for (j = 1; j <= np[k]; j++) { p = pol[k, j]
                 if (p ~ /^dense/ || !(ips[k, "dense"] > 0 && ips[k, p] > 0)) continue
                 printf "%s: %s: %s: ", w[2], w[3], p
                 if (att[k, p] > 0) printf "last-steps attention %.2fx, per-image latency %.2fx, ", att[k, "dense"] / att[k, p], lat[k, "dense"] / lat[k, p]
                 printf "img/s / dense %.2fx (%d vs %d images)\n", ips[k, p] / ips[k, "dense"], img[k, p], img[k, "dense"] } } }' "$1"
}
