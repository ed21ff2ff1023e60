#!/usr/bin/env bash
# Real fuzzing: builds every fuzz target of tests/fuzz with clang, libFuzzer,
# ASan and UBSan in build-fuzz/ (CPU only) and runs each for FUZZ_SECONDS
# (default 60). New inputs go to build-fuzz/fuzz-work/<target>/ (not the
# committed corpus), crashes to build-fuzz/fuzz-artifacts/. Exit 1 when any
# target found something. See docs/fuzzing.md for longer runs and triage.
#
#   scripts/fuzz.sh                      # every target, 60 s each
#   FUZZ_SECONDS=600 scripts/fuzz.sh fuzz_tokenizer_json fuzz_safetensors
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
BUILD_DIR=${BUILD_DIR:-build-fuzz}
FUZZ_SECONDS=${FUZZ_SECONDS:-60}
scripts/install-deps.sh fuzz

sanitize="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
CC=clang CXX=clang++ cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DARGEN_CUDA=OFF -DARGEN_FUZZ=ON -DCMAKE_C_FLAGS="$sanitize" -DCMAKE_CXX_FLAGS="$sanitize" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" ${CMAKE_ARGS:-} >/dev/null

if [ $# -gt 0 ]; then
  targets=("$@")
else
  mapfile -t targets < <(ls "$BUILD_DIR/fuzz_targets")
fi
cmake --build "$BUILD_DIR" -j "${JOBS:-$(nproc)}" --target "${targets[@]}"

work="$BUILD_DIR/fuzz-work"
artifacts="$BUILD_DIR/fuzz-artifacts"
mkdir -p "$work" "$artifacts"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
export ARGEN_SOURCE_DIR="$ROOT"
failed=()
printf '%-28s %8s %10s %8s  %s\n' target seconds execs corpus result
for t in "${targets[@]}"; do
  corpus=$(head -n1 "$BUILD_DIR/fuzz_targets/$t")
  exe=$(find "$BUILD_DIR/tests" -type f -name "$t" -perm -u+x | head -n1)
  mkdir -p "$work/$t"
  dict=()
  [ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
  log="$artifacts/$t.log"
  rc=0
  "$exe" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -artifact_prefix="$artifacts/$t-" -print_final_stats=1 "${dict[@]}" "$work/$t" "$corpus" \
    >"$log" 2>&1 || rc=$?
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  size=$(ls "$work/$t" | wc -l)
  if [ "$rc" -eq 0 ]; then result=ok; else result="FAILED (rc $rc, see $log)"; failed+=("$t"); fi
  printf '%-28s %8s %10s %8s  %s\n' "$t" "$FUZZ_SECONDS" "$execs" "$size" "$result"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz.sh: findings in: ${failed[*]} (inputs: $artifacts/)" >&2
  exit 1
fi
