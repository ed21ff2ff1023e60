#!/usr/bin/env bash
# The test command: installs what is needed, builds, runs every test that
# needs no GPU (tests labelled `gpu` run on the device, see docs/PERFORMANCE.md).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
cd "${BUILD_DIR:-build}"
ctest -LE gpu --output-on-failure -j "${JOBS:-$(nproc)}" --timeout 600
