# Every gpu-labelled test binary in the bundle, each time-boxed.
run_scenario() {
  # The tests that spawn the server take the bundle's (tests/reliability/process_util.cc).
  [ -x "$BIN/argen_server" ] && export ARGEN_SERVER_BIN=$BIN/argen_server
  for t in "$BIN"/*_test; do
    [ -x "$t" ] || continue
    stamp "$(basename "$t")"
    guarded 120 "$t" --gtest_brief=1
    echo "rc($(basename "$t"))=$?"
  done
}
summarize() { grep -h -E "PASSED|FAILED|^rc\(|SKIPPED" "$1" | cut -c1-200; }
