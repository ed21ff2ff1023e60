#!/usr/bin/env bash
# Builds every CPU target with AddressSanitizer + UBSan (Debug) in build-asan/
# and runs the tests that need no GPU. Run it now and then; fix what it finds.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
BUILD_DIR=${BUILD_DIR:-build-asan} BUILD_TYPE=Debug \
  CMAKE_ARGS="-DARGEN_SANITIZE=ON -DARGEN_CUDA=OFF ${CMAKE_ARGS:-}" scripts/build.sh
SUPPRESSIONS="$PWD/scripts/lsan.supp"
cd "${BUILD_DIR:-build-asan}"
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS="suppressions=$SUPPRESSIONS" \
  ctest -LE gpu --output-on-failure -j "${JOBS:-$(nproc)}" --timeout 900
