#!/usr/bin/env bash
# The benchmark lab's driver, run on the device from the repository root:
#   bash bench/gpu/lab.sh SCENARIO [SCENARIO...]
# Each scenario is bench/gpu/scenarios/SCENARIO.sh (a `run_scenario`
# function); it runs the binaries of the bundle .gpubundle/$BUNDLE.tar.xz
# (bench/gpu/make_bundle.sh makes it here) and, for an A/B, the baseline
# bundle $BASE_BUNDLE, in the same call. Every scenario writes
# $OUT/SCENARIO.txt; the lines that matter go to $OUT/summary.txt.
# DEADLINE (seconds, default 570) bounds the whole call.
set -u
cd "$(dirname "$0")/../.."
. bench/gpu/bundle_env.sh
. bench/gpu/time_guard.sh
t0=$(date +%s)
DEADLINE=${DEADLINE:-570}
BASE_BIN=""
if [ -n "${BASE_BUNDLE:-}" ]; then
  use_bundle "$BASE_BUNDLE" || exit 1
  BASE_BIN=$BIN
fi
use_bundle "${BUNDLE:?set BUNDLE to a .gpubundle name}" || exit 1
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader >"$OUT/device.txt" 2>&1
for s in "$@"; do
  f=bench/gpu/scenarios/$s.sh
  [ -f "$f" ] || { echo "lab: no scenario $s ($f)" | tee -a "$OUT/summary.txt"; continue; }
  unset -f run_scenario summarize
  . "$f"
  stamp "scenario $s" >>"$OUT/summary.txt"
  run_scenario >"$OUT/$s.txt" 2>&1
  summarize "$OUT/$s.txt" >>"$OUT/summary.txt" 2>&1
done
echo "total $(( $(date +%s) - t0 )) s" >>"$OUT/summary.txt"
cat "$OUT/summary.txt"
