# The full H200 at diagonal 95% N_r 64, lone images reading shared prompt
# rows, bf16 and fp8 weights; the baseline bundle (BASE_BUNDLE) first when set.
run_scenario() {
  for b in ${BASE_BIN:+"$BASE_BIN"} "$BIN"; do
    stamp "$( [ "$b" = "$BIN" ] && echo candidate || echo baseline ): full H200, diagonal 95%"
    guarded 240 "$b/argen_bench" --model 7b --card-memory 139G --max-batch --max-rows 4096 \
      --policies diagonal:0.95:64 --prompt-sharing across --weight-dtype auto,fp8
  done
}
summarize() { grep -h -E "^== |^7b |^card" "$1" | cut -c1-200; }
