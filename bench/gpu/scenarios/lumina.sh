# Lumina-mGPT-7B shape at 768 px (random weights): dense against diagonal 95% (N_r = 0.5 L_dec) at the paper's batch
# (16 images: last-step attention, per-image latency), the 48 GB card's max batch, and the full H200 (auto sizing).
# LUMINA_MODELS: the shapes (default lumina-768; "lumina-768 lumina-512" for both, ~+100 s).
# Sourced by bench/gpu/lab.sh, which reads BASELINE and NEEDS and provides BIN, AB_DIRS, OUT, stamp, guarded.
# shellcheck shell=bash disable=SC2034,SC2154
BASELINE="dense in the same argen_bench process (the issue #18 ratios); BASE_BUNDLE's argen_bench at batch 16 first (when set)"
NEEDS="argen_bench"
run_scenario() {
  local m b i
  for m in ${LUMINA_MODELS:-lumina-768}; do
    for i in "${!AB_DIRS[@]}"; do
      b=${AB_DIRS[$i]}
      stamp "${AB_NAMES[$i]}: $m, 16 images"
      guarded 150 "$b/argen_bench" --model "$m" --batches 16 --policies dense,diagonal:0.95 --prompt-len 40 --stage-steps 4
    done
    stamp "candidate: $m, 48 GB card, max batch"
    guarded 100 "$BIN/argen_bench" --model "$m" --card-memory 48G --max-batch --max-rows 256 \
      --policies dense,diagonal:0.95 --prompt-len 40
    stamp "candidate: $m, full H200, auto sizing, max batch"
    guarded 150 "$BIN/argen_bench" --model "$m" --auto-sizing --max-batch --policies dense,diagonal:0.95 \
      --prompt-len 40 --stage-steps 0
  done
}
# argen_bench lines: model policy images prefill_s decode_s step_ms last_ms img/s | embed plan qkv attention
# observe apply o_proj ffn head indexing kv_MB/img keys. Ratios are dense / diagonal of the same block.
summarize() {
  grep -h -E "^== |^lumina-|sizing" "$1" | cut -c1-200
  awk '/^== / { blk = $0; keys[++nb] = blk }
       $1 ~ /^lumina-/ && $9 == "|" { p = ($2 == "dense") ? "dense" : "diag"
         img[blk, p] = $3; ips[blk, p] = $8; lat[blk, p] = $4 + $5; att[blk, p] = $13 }
       END { for (i = 1; i <= nb; i++) { k = keys[i]
               if (!(ips[k, "dense"] > 0 && ips[k, "diag"] > 0)) continue
               split(k, w, ": "); printf "%s: %s: ", w[2], w[3]
               if (att[k, "diag"] > 0) printf "attention %.2fx, per-image latency %.2fx, ", att[k, "dense"] / att[k, "diag"], lat[k, "dense"] / lat[k, "diag"]
               printf "img/s diagonal / dense %.2fx (%d vs %d images)\n", ips[k, "diag"] / ips[k, "dense"], img[k, "diag"], img[k, "dense"] } }' "$1"
}
