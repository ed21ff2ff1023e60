#!/usr/bin/env bash
# One device run for issue #16's GPU parts (docs/reliability.md): the gpu-labelled
# fault tests (device OOM names the budget, NaN weights refused, injected CUDA
# step errors in a prefill and in a graph-replayed decode step fail only that
# step and later images are byte-identical to a fault-free run, NaN logits on
# the device fail the request, a lost CUDA context ends argen_server with exit 3),
# then a GPU soak of 2,000 mixed requests on the tiny checkpoint (RSS and device
# memory sampled; every gauge back to 0; clean drain). A time guard keeps the
# whole run under DEADLINE seconds (default 180): each step gets at most what
# is left (the fault tests up to 100 s).
#
# Build here (CUDA on) and carry the bundle:
#   cmake --build build --target gpu_faults_test argen_server argen_soak
#   rm -rf .gpubundle/reliab && /work/shared/tools/gpu-bundle.sh .gpubundle/reliab \
#     build/tests/reliability/gpu_faults_test build/server/argen_server build/tests/soak/argen_soak
#   tar -cJf .gpubundle/reliab.tar.xz -C .gpubundle/reliab . && rm -rf .gpubundle/reliab
# then on the device (carry .gpubundle/reliab.tar.xz), from the repository root:
#   bash bench/gpu/run_reliability_device.sh
# Logs in $OUT: tests.log, summary.txt and soak/{server.log,soak.log,rss.csv}.
set -u
B=/tmp/b
if [ ! -x $B/bin/gpu_faults_test ]; then mkdir -p $B && tar -xJf .gpubundle/reliab.tar.xz -C $B || exit 1; fi
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
export ARGEN_SOURCE_DIR=$PWD
export ARGEN_SERVER_BIN=$B/bin/argen_server
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT/soak"
t0=$(date +%s)
stamp() { echo "== $(( $(date +%s) - t0 )) s: $*"; }
DEADLINE=${DEADLINE:-180}
left() { local l=$(( DEADLINE - ($(date +%s) - t0) - 5 )); [ "$l" -gt "${1:-$l}" ] && l=$1; echo $(( l > 1 ? l : 1 )); }

nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv >"$OUT/tests.log" 2>&1
stamp "gpu_faults_test" >>"$OUT/tests.log"
timeout "$(left 100)" $B/bin/gpu_faults_test >>"$OUT/tests.log" 2>&1
echo "gpu_faults_test rc=$?" >>"$OUT/tests.log"
nvidia-smi --query-gpu=memory.used --format=csv >>"$OUT/tests.log" 2>&1

stamp "soak (cuda, 2000 requests)" >>"$OUT/tests.log"
SERVER_BIN=$B/bin/argen_server SOAK_BIN=$B/bin/argen_soak timeout "$(left)" bash tests/soak/soak.sh \
  --backend cuda --requests 2000 --concurrency 16 --max-rss-growth-mib 64 --out "$OUT/soak" \
  -- --vq_backend=cuda --kv_budget_bytes=2GiB --max_batch_rows=64 >>"$OUT/tests.log" 2>&1
echo "soak rc=$?" >>"$OUT/tests.log"
stamp done >>"$OUT/tests.log"

{
  grep -h -E "^\[ +(OK|FAILED) +\]|PASSED|FAILED|rc=" "$OUT/tests.log"
  grep -h -E "argen_soak:|outcome|unexpected|RSS|gauge|soak.sh" "$OUT/soak/soak.log" "$OUT/tests.log" 2>/dev/null | sort -u
  if [ -f "$OUT/soak/rss.csv" ]; then
    awk -F, 'NR > 1 && $4 != "" { if (min == "" || $4 < min) min = $4; if ($4 > max) max = $4; last = $4 }
             END { if (max != "") printf "device memory used (MiB): min %s, max %s, last %s\n", min, max, last }' \
      "$OUT/soak/rss.csv"
  fi
} | tee "$OUT/summary.txt"
