# argen_bench 7B at 1, 16, 64 and 128 images, dense and diagonal 95% N_r 64,
# bf16 and fp8 weights; the baseline bundle (BASE_BUNDLE) first when set.
run_scenario() {
  for b in ${BASE_BIN:+"$BASE_BIN"} "$BIN"; do
    stamp "$( [ "$b" = "$BIN" ] && echo candidate || echo baseline ): 7B 1/16/64/128 images"
    guarded 170 "$b/argen_bench" --model 7b --batches 1,16,64,128 --policies dense,diagonal:0.95:64 \
      --weight-dtype auto,fp8
  done
}
summarize() { grep -h -E "^== |^7b " "$1" | cut -c1-200; }
