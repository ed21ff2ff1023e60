# A 48 GB card (the paper's): the largest batch each policy fits, diagonal 95% N_r 288 (0.5 L_dec) against dense.
# BENCH_FLAGS: more argen_bench flags for every run (e.g. --attention-kernel two-pass).
# Sourced by bench/gpu/lab.sh, which reads BASELINE and NEEDS and provides BIN, AB_DIRS, OUT, stamp, guarded.
# shellcheck shell=bash disable=SC2034,SC2154
BASELINE="dense in the same argen_bench process (the ratio diagonal / dense, same weights); BASE_BUNDLE's first (when set)"
NEEDS="argen_bench"
run_scenario() {
  local b i
  for i in "${!AB_DIRS[@]}"; do
    b=${AB_DIRS[$i]}
    stamp "${AB_NAMES[$i]}: 48 GB card, N_r 288 and dense"
    # shellcheck disable=SC2086  # BENCH_FLAGS is a list of flags
    guarded 200 "$b/argen_bench" ${BENCH_FLAGS:-} --model 7b --card-memory 48G --max-batch --max-rows 1024 \
      --policies diagonal:0.95:288,dense --weight-dtype auto,fp8
  done
}
# Lines: model policy images prefill_s decode_s step_ms last_ms img/s | ...
summarize() {
  grep -h -E "^== |^7b " "$1" | cut -c1-200
  awk '/^== / { run++ } $1 == "7b" && $9 == "|" {
         w = ($2 ~ /fp8w/) ? "fp8 weights" : "bf16 weights"; p = ($2 ~ /^dense/) ? "dense" : "diag"
         ips[run, w, p] = $8; ws[w] = 1 }
       END { for (r = 1; r <= run; r++) for (w in ws) if (ips[r, w, "dense"] > 0)
               printf "run %d, %s: diagonal / dense %.2fx\n", r, w, ips[r, w, "diag"] / ips[r, w, "dense"] }' "$1"
}
