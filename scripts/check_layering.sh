#!/usr/bin/env bash
# The layering rules of docs/ARCHITECTURE.md, checked on the sources (CI runs
# this as the ctest test layering_check):
#   * engine/cuda neither includes nor links engine/cpu (weights come from the
#     family's tensor map through a WeightSource, not from the CPU backend);
#   * kernels/ includes nothing from engine/ (its tests may use host references);
#   * scheduler/ includes no CUDA header and links no CUDA target;
#   * the devices (engine/cpu, engine/cuda) and the generic engine
#     (engine/model) name no model family (engine/families/), and a family names
#     no device;
#   * the tokenizer (engine/tokenizer) names no model family: a family's
#     prompt recipe and vocabulary helpers live in the family's folder.
# Usage: scripts/check_layering.sh [ROOT]   (default: the repository root)
# Exit 0 when clean; 1 listing every violation.
set -u
ROOT=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$ROOT" || exit 2
fail=0

# violation PATTERN WHAT FILES...: every file line matching PATTERN is one.
violation() {
  local pattern=$1 what=$2
  shift 2
  [ $# -eq 0 ] && return
  local hits
  hits=$(grep -nE "$pattern" "$@" 2>/dev/null)
  if [ -n "$hits" ]; then
    echo "layering: $what:"
    echo "$hits" | sed 's/^/  /'
    fail=1
  fi
}

# sources DIR [exclude-tests]: C++/CUDA sources under DIR.
sources() {
  local dir=$1 tests=${2:-}
  [ -d "$dir" ] || return
  if [ "$tests" = "no-tests" ]; then
    find "$dir" -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \) -not -path '*/tests/*'
  else
    find "$dir" -type f \( -name '*.h' -o -name '*.cc' -o -name '*.cu' -o -name '*.cuh' \)
  fi
}

# shellcheck disable=SC2046
violation '#include "engine/cpu/' "engine/cuda includes engine/cpu" $(sources engine/cuda)
if [ -f engine/cuda/CMakeLists.txt ]; then
  # The argen_cuda library's links (not its tests', which compare against the CPU reference).
  if awk '/target_link_libraries\(argen_cuda[ )]/ { on = 1 } on { print } on && /\)/ { on = 0 }' \
       engine/cuda/CMakeLists.txt | grep -qw argen_cpu; then
    echo "layering: engine/cuda/CMakeLists.txt: argen_cuda links argen_cpu"
    fail=1
  fi
fi
# shellcheck disable=SC2046
violation '#include "engine/' "kernels/ includes engine/" $(sources kernels no-tests)
# shellcheck disable=SC2046
violation '#include [<"](cuda|cublas|cudnn|curand|nvToolsExt)|#include "(kernels|engine/cuda|engine/vq_cuda)/' \
  "scheduler/ includes CUDA headers" $(sources scheduler)
if [ -f scheduler/CMakeLists.txt ] || [ -f scheduler/tests/CMakeLists.txt ]; then
  violation 'CUDA::|argen_cuda|argen_kernels|argen_vq_cuda' "scheduler/ links CUDA" \
    $(ls scheduler/CMakeLists.txt scheduler/tests/CMakeLists.txt 2>/dev/null)
fi
# shellcheck disable=SC2046
violation '#include "engine/families/' "a device or the generic engine names a model family" \
  $(sources engine/cpu no-tests) $(sources engine/cuda no-tests) $(sources engine/model no-tests)
# shellcheck disable=SC2046
violation '#include "engine/(cpu|cuda)/' "a model family names a device" $(sources engine/families)
# shellcheck disable=SC2046
violation '#include "engine/families/' "the tokenizer names a model family" $(sources engine/tokenizer)

if [ "$fail" -ne 0 ]; then
  echo "layering check failed (rules: docs/ARCHITECTURE.md)"
  exit 1
fi
echo "layering check: clean"
