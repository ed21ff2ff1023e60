#!/usr/bin/env bash
# The benchmark lab's driver, run on the device from the repository root:
#   DEADLINE=570 BUNDLE=cand [BASE_BUNDLE=base] bash bench/gpu/lab.sh SCENARIO [SCENARIO...]
#   bash bench/gpu/lab.sh --list          # the scenarios, one line each (no device needed)
# Each scenario is bench/gpu/scenarios/SCENARIO.sh: BASELINE (what it is
# measured against in the same call), NEEDS (the binaries it runs),
# run_scenario and summarize. It runs the binaries of the bundle
# .gpubundle/$BUNDLE.tar.xz (bench/gpu/make_bundle.sh makes it) and, for an
# A/B, those of $BASE_BUNDLE. LAB_BIN / LAB_BASE_BIN name binary folders
# instead (a local build; the CPU test's stubs). Writes $OUT/cmd.txt (this
# command, the bundles' revisions), $OUT/device.txt, $OUT/SCENARIO.txt each,
# and $OUT/summary.txt (the lines that matter); more than 8 files (the run
# tool's limit; LAB_MAX_FILES) are packed into $OUT/all.tgz. DEADLINE (seconds, default
# 570) bounds the whole call. PYTHON (default python3: on the device the one
# with torch) runs the PyTorch baselines and the checkpoint writer.
# shellcheck source-path=SCRIPTDIR/../..
set -u
cd "$(dirname "$0")/../.." || exit 1
if [ "${1:-}" = --list ]; then
  for f in bench/gpu/scenarios/*.sh; do
    printf '%-18s %s\n' "$(basename "$f" .sh)" "$(sed -n '1s/^# //p' "$f")"
  done
  exit 0
fi
[ $# -gt 0 ] || { echo "usage: [DEADLINE=s] BUNDLE=name [BASE_BUNDLE=name] bash bench/gpu/lab.sh SCENARIO... | --list" >&2; exit 2; }
. bench/gpu/bundle_env.sh
. bench/gpu/time_guard.sh
. bench/gpu/lib/serve.sh
t0=$(date +%s)
DEADLINE=${DEADLINE:-570}
PYTHON=${PYTHON:-python3}
LAB_WORK=${LAB_WORK:-/tmp/argen-lab}
BASE_BIN=""
if [ -n "${LAB_BIN:-}" ]; then
  BIN=$LAB_BIN
  BASE_BIN=${LAB_BASE_BIN:-}
  export ARGEN_SOURCE_DIR=$PWD
  OUT=${OUT:-/tmp/out}
  mkdir -p "$OUT"
else
  if [ -n "${BASE_BUNDLE:-}" ]; then
    use_bundle "$BASE_BUNDLE" || exit 1
    BASE_BIN=$BIN
  fi
  use_bundle "${BUNDLE:?set BUNDLE to a .gpubundle name (or LAB_BIN to a folder of binaries)}" || exit 1
fi
# The bundles an A/B scenario runs, baseline first: AB_DIRS (binary folders), AB_NAMES.
AB_DIRS=() AB_NAMES=()
if [ -n "$BASE_BIN" ]; then AB_DIRS+=("$BASE_BIN") AB_NAMES+=(baseline); fi
AB_DIRS+=("$BIN") AB_NAMES+=(candidate)
mkdir -p "$LAB_WORK"
trap 'server_stop >/dev/null 2>&1; rm -rf "$LAB_WORK"' EXIT
{
  echo "DEADLINE=$DEADLINE BUNDLE=${BUNDLE:-} BASE_BUNDLE=${BASE_BUNDLE:-} bash bench/gpu/lab.sh $*"
  # The scenarios' own settings (their upper-case prefixes), so that the folder says how to rerun it.
  echo "settings: $(env | grep -E '^(FAMILY|NEXTSTEP|ONE_IMAGE|TORCH_FAMILY|VQ_DECODE|SINGLE|PARALLEL|SPECULATIVE|EMU3|LUMINA|SERVER|FULL_CARD|SWEEP|BENCH|MICRO|PROFILE)_[A-Z_]*=|^GPU_TESTS=' | sort | tr '\n' ' ')"
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "bundle: $(cat "$BIN/../rev.txt" 2>/dev/null || echo "$BIN (no rev.txt)")"
  [ -n "$BASE_BIN" ] && echo "baseline bundle: $(cat "$BASE_BIN/../rev.txt" 2>/dev/null || echo "$BASE_BIN (no rev.txt)")"
} >"$OUT/cmd.txt"
nvidia-smi --query-gpu=name,memory.total,clocks.max.sm --format=csv,noheader >"$OUT/device.txt" 2>&1
: >"$OUT/summary.txt"
for s in "$@"; do
  f=bench/gpu/scenarios/$s.sh
  [ -f "$f" ] || { echo "lab: no scenario $s ($f; bash bench/gpu/lab.sh --list)" | tee -a "$OUT/summary.txt"; continue; }
  unset -f run_scenario summarize
  BASELINE="" NEEDS=""
  # shellcheck source=/dev/null
  . "$f"
  {
    stamp "scenario $s"
    echo "baseline: ${BASELINE:-none stated}"
    for b in $NEEDS; do
      [ -x "$BIN/$b" ] || echo "MISSING $b in the bundle (make_bundle.sh builds it unless BUNDLE_TARGETS leaves it out)"
    done
  } >>"$OUT/summary.txt"
  run_scenario >"$OUT/$s.txt" 2>&1
  summarize "$OUT/$s.txt" >>"$OUT/summary.txt" 2>&1
done
echo "total $(($(date +%s) - t0)) s" >>"$OUT/summary.txt"
# The run tool brings back at most LAB_MAX_FILES files (8): past that, the
# rest goes into all.tgz beside cmd.txt and summary.txt (results/ keeps the unpacked folder).
files=$(find "$OUT" -type f | wc -l)
if [ "$files" -gt "${LAB_MAX_FILES:-8}" ]; then
  tar czf "$LAB_WORK/all.tgz" -C "$OUT" --exclude=cmd.txt --exclude=summary.txt . &&
    find "$OUT" -mindepth 1 ! -name cmd.txt ! -name summary.txt -delete &&
    mv "$LAB_WORK/all.tgz" "$OUT/all.tgz" &&
    echo "lab: $files files packed into all.tgz (tar xzf all.tgz)" >>"$OUT/summary.txt"
fi
cat "$OUT/summary.txt"
