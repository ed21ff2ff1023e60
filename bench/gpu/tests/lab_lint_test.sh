#!/usr/bin/env bash
# The benchmark lab's shell scripts (bench/gpu: driver, bundle, shared steps,
# scenarios, this test's stub run) parse, and pass shellcheck where it is
# installed (scripts/install-deps.sh installs it; exit 77 = skipped without it).
#   bash bench/gpu/tests/lab_lint_test.sh       (ctest: bench_lab_lint_test)
set -u
cd "$(dirname "$0")/../../.." || exit 1
files=(bench/gpu/*.sh bench/gpu/lib/*.sh bench/gpu/scenarios/*.sh bench/gpu/tests/*.sh)
fail=0
for f in "${files[@]}"; do bash -n "$f" || { echo "FAIL: bash -n $f"; fail=1; }; done
[ $fail = 0 ] || exit 1
if ! command -v shellcheck >/dev/null; then
  echo "shellcheck is not installed (scripts/install-deps.sh): only bash -n ran"
  exit 77
fi
shellcheck -x -s bash "${files[@]}" || exit 1
echo "${#files[@]} scripts: bash -n and shellcheck clean"
