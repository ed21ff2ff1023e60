# Every gpu-labelled test binary in the bundle, each time-boxed (models/ must be carried for the shipped-model cases).
# GPU_TESTS: only these executables (names, space-separated; default all).
# Sourced by bench/gpu/lab.sh, which reads BASELINE and NEEDS and provides BIN, AB_DIRS, OUT, stamp, guarded.
# shellcheck shell=bash disable=SC2034,SC2154
BASELINE="none: pass / fail"
NEEDS=""
run_scenario() {
  # The tests that spawn the server take the bundle's (tests/reliability/process_util.cc).
  [ -x "$BIN/argen_server" ] && export ARGEN_SERVER_BIN=$BIN/argen_server
  [ -d models/argen-scenes-v1 ] || echo "note: models/argen-scenes-v1 not carried: the cases that read it fail (not found)"
  for t in "$BIN"/*_test; do
    [ -x "$t" ] || continue
    if [ -n "${GPU_TESTS:-}" ] && [[ " $GPU_TESTS " != *" $(basename "$t") "* ]]; then continue; fi
    stamp "$(basename "$t")"
    guarded 120 "$t" --gtest_brief=1
    local rc=$?  # before the echo: its $(basename) would reset $? to 0
    echo "rc($(basename "$t"))=$rc"
  done
}
summarize() { grep -h -E "^note:|PASSED|FAILED|^rc\(|SKIPPED" "$1" | cut -c1-200; }
