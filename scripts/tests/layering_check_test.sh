#!/usr/bin/env bash
# The layering check must catch each rule's violation: a synthetic tree with
# one violation at a time must fail, a clean one must pass.
set -u
CHECK=$(cd "$(dirname "$0")/.." && pwd)/check_layering.sh
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
clean_tree() {
  rm -rf "$TMP/t" && mkdir -p "$TMP/t"/{engine/cuda,engine/cpu,engine/model,engine/families/janus,kernels/tests,scheduler}
  echo '#include "engine/model/backend.h"' >"$TMP/t/engine/cuda/backend.cc"
  printf 'add_library(argen_cuda STATIC a.cc)\ntarget_link_libraries(argen_cuda PUBLIC argen_kernels)\nargen_warnings(argen_cuda)\n' \
    >"$TMP/t/engine/cuda/CMakeLists.txt"
  echo '#include "kernels/common.cuh"' >"$TMP/t/kernels/k.cu"
  echo '#include "engine/model/sampler.h"' >"$TMP/t/kernels/tests/k_test.cc"  # tests may use host references
  echo '#include "engine/engine.h"' >"$TMP/t/scheduler/s.cc"
  echo '#include "engine/model/model_spec.h"' >"$TMP/t/engine/families/janus/f.cc"
}
status=0
clean_tree
"$CHECK" "$TMP/t" >/dev/null || { echo "a clean tree failed"; status=1; }
while IFS='|' read -r file line; do
  clean_tree
  mkdir -p "$(dirname "$TMP/t/$file")"
  echo "$line" >>"$TMP/t/$file"
  if "$CHECK" "$TMP/t" >/dev/null; then
    echo "not caught: $file: $line"
    status=1
  fi
done <<'CASES'
engine/cuda/backend.cc|#include "engine/cpu/cpu_weights.h"
engine/cuda/CMakeLists.txt|target_link_libraries(argen_cuda PUBLIC argen_cpu)
kernels/sampling.cu|#include "engine/model/sampling_rng.h"
scheduler/s.cc|#include <cuda_runtime.h>
scheduler/s.cc|#include "kernels/sampling.h"
scheduler/CMakeLists.txt|target_link_libraries(argen_scheduler PUBLIC CUDA::cudart)
engine/model/generic_engine.cc|#include "engine/families/janus/janus_spec.h"
engine/cpu/cpu_backend.cc|#include "engine/families/janus/janus_config.h"
engine/families/janus/f.cc|#include "engine/cuda/cuda_backend.h"
engine/tokenizer/tokenizer.cc|#include "engine/families/lumina/lumina_prompt.h"
CASES
[ "$status" -eq 0 ] && echo "layering check test: every rule caught"
exit "$status"
