# NextStep-1-14B (random weights, published shape, device flow head): the step's decoder / head split at 1, 16, 64
# images, end-to-end img/s and one image's latency, the CUDA VAE decoder alone, max batch on 80 GB and the whole card,
# dense against diagonal 95% at the family's N_r (86: 2 2/3 rows of 32). Issue #31's Speed figures; <= 420 s.
# NEXTSTEP_STEPS: which of "head attention lone vae 80g full" (default all, in that order; "attention": the
# kernel alone at the last step, --attention-micro, at NEXTSTEP_BATCHES and NEXTSTEP_POLICY); "head" times the flow head alone
# (--head-micro, no decoder: seconds) at NEXTSTEP_HEAD_BATCHES (default 1,16,64,124), BASE_BUNDLE's binary first
# when set; NEXTSTEP_BATCHES: lone's and vae's batches (default 1,16,64); NEXTSTEP_MAX_ROWS: the max-batch runs' row cap (default 768: 384 images; a line at
# 384 images means the cap bound, not the memory); NEXTSTEP_CARD: "the whole card" as a budget (default: the card's
# free memory less 5 GB, about the server's auto-sizing margin of 3%; 140G without nvidia-smi); NEXTSTEP_GUARD: seconds
# an 80g or full run may take (default 110 / 120; dense and diagonal together need ~250); NEXTSTEP_MAX_BATCH_POLICIES:
# the 80g and full runs' policies (default dense and NEXTSTEP_POLICY; one alone fits a call); NEXTSTEP_POLICY: the
# sparse policy (default diagonal:0.95; "dense": dense alone). The lone runs' pool is 40 GB (64 dense images take ~27 GB), so that the
# head's own copy for the split (argen_bench's FlowHeadMicro) has room.
# Sourced by bench/gpu/lab.sh, which reads BASELINE and NEEDS and provides BIN, OUT, stamp, guarded.
# shellcheck shell=bash disable=SC2034,SC2154
BASELINE="dense in the same argen_bench process, same shape and weights; the head's share against the issue's 30% target; head: BASE_BUNDLE's head, same call"
NEEDS="argen_bench"
whole_card() {  # the free memory in decimal GB, less 5
  local mib
  mib=$(nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits 2>/dev/null | head -1)
  if [[ "$mib" =~ ^[0-9]+$ ]]; then echo "$((mib * 1048576 / 1000000000 - 5))G"; else echo 140G; fi
}
run_scenario() {
  local m=nextstep-14b p=${NEXTSTEP_POLICY:-diagonal:0.95} b=${NEXTSTEP_BATCHES:-1,16,64} rows=${NEXTSTEP_MAX_ROWS:-768}
  local policies="dense,$p"
  [ "$p" = dense ] && policies=dense
  local step card i
  for step in ${NEXTSTEP_STEPS:-head attention lone vae 80g full}; do
    case $step in
      head)
        for i in "${!AB_DIRS[@]}"; do
          stamp "${AB_NAMES[$i]}: $m, the flow head alone"
          guarded 60 "${AB_DIRS[$i]}/argen_bench" --model "$m" --head-micro --batches "${NEXTSTEP_HEAD_BATCHES:-1,16,64,124}"
        done ;;
      attention)
        stamp "candidate: $m, the attention kernel alone at the last step (40 / 8 heads)"
        local ap=$p
        [ "$ap" = dense ] && ap=diagonal:0.95  # the micro times dense against a sparse policy
        guarded 60 "$BIN/argen_bench" --attention-micro --model "$m" --batches "$b" --policies "$ap" --prompt-len 50 ;;
      lone)
        stamp "candidate: $m, $b images, step split"
        guarded 150 "$BIN/argen_bench" --model "$m" --batches "$b" --policies "$policies" --prompt-len 50 --stage-steps 4 \
          --kv-budget 40G ;;
      vae)
        stamp "candidate: $m, VAE decoder alone, $b images"
        guarded 30 "$BIN/argen_bench" --model "$m" --vae-micro --batches "$b" ;;
      80g)
        stamp "candidate: $m, 80 GB card, max batch"
        guarded "${NEXTSTEP_GUARD:-110}" "$BIN/argen_bench" --model "$m" --card-memory 80G --max-batch --max-rows "$rows" \
          --policies "${NEXTSTEP_MAX_BATCH_POLICIES:-$policies}" --prompt-len 50 --stage-steps 4 ;;
      full)
        card=${NEXTSTEP_CARD:-$(whole_card)}
        stamp "candidate: $m, whole card ($card), max batch"
        guarded "${NEXTSTEP_GUARD:-120}" "$BIN/argen_bench" --model "$m" --card-memory "$card" --max-batch --max-rows "$rows" \
          --policies "${NEXTSTEP_MAX_BATCH_POLICIES:-$policies}" --prompt-len 50 --stage-steps 4 ;;
      *) echo "nextstep: no step $step (head attention lone vae 80g full)" ;;
    esac
  done
}
# argen_bench lines: model policy images prefill_s decode_s step_ms last_ms img/s | embed plan qkv attention
# observe apply o_proj ffn head indexing kv_MB/img keys; "split" lines: the head alone (graph) against the graphed
# step; "vae" lines: the decoder alone. Ratios are diagonal / dense of the same block and batch.
summarize() {
  grep -h -E "^== |^card |^model [^ ]+:|^vae |^head |^kernel |^attention |SKIPPED|rror" "$1" | cut -c1-240
  awk '/^== / { who = ($0 ~ /baseline:/) ? "baseline" : "candidate" }
       /^head / { if (who == "candidate" && $NF != "default") next  # the A/B variants print as they are
                  n = $3; sub(/images=/, "", n); sub(/:/, "", n); ms[who, n] = $5; if (who == "candidate") order[++k] = n }
       END { for (i = 1; i <= k; i++) { n = order[i]
               if (ms["baseline", n] > 0) printf "head alone %s images: %.3f ms against the baseline %.3f ms: %.2fx\n", n,
                 ms["candidate", n], ms["baseline", n], ms["baseline", n] / ms["candidate", n] } }' "$1"
  awk '$9 == "|" && $3 ~ /^[0-9]+$/ { print }' "$1" | cut -c1-200
  grep -h "^split " "$1" | cut -c1-260
  awk '/^== / { blk = $0 }
       /^split / && match($0, /= [0-9.]+% of the step/) {
         share = substr($0, RSTART + 2, RLENGTH - 2); sub(/%.*/, "", share)
         n = $4; sub(/images=/, "", n); sub(/:/, "", n)
         if (n == 64) printf "head share %s 64 images: %.1f%% of the step (target < 30%%): %s\n", $3, share,
           (share + 0 < 30 ? "met" : "NOT met") }
       $9 == "|" && $3 == 1 && blk !~ /max batch/ { printf "one image %s: latency %.2f s (prefill %s + decode %s)\n", $2, $4 + $5, $4, $5 }' "$1"
  awk '/^== / { blk = $0 }
       $9 == "|" && $3 ~ /^[0-9]+$/ { p = $2
         k = (blk ~ /max batch/) ? blk : blk " @" $3
         if (!(k in seen)) { seen[k] = 1; keys[++n] = k }
         if (!((k, p) in img)) { np[k]++; pol[k, np[k]] = p }
         img[k, p] = $3; ips[k, p] = $8; lat[k, p] = $4 + $5 }
       END { for (i = 1; i <= n; i++) { k = keys[i]; split(k, w, ": ")
               for (j = 1; j <= np[k]; j++) { p = pol[k, j]
                 if (p ~ /^dense/ || !(ips[k, "dense"] > 0 && ips[k, p] > 0)) continue
                 printf "%s: %s: %s: latency dense / this %.2fx, img/s / dense %.2fx (%d vs %d images)\n", w[2], w[3], p,
                   lat[k, "dense"] / lat[k, p], ips[k, p] / ips[k, "dense"], img[k, p], img[k, "dense"] } } }' "$1"
}
