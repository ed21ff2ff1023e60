#!/usr/bin/env bash
# One device run for the cuBLASLt GEMM paths (engine/cuda/gemm.h): the GEMM test
# (every path against cublasGemmEx, tuned determinism, capture), the backend
# tests with the new default (lt-tuned), then the 7B end-to-end lines once per
# --gemm mode, A/B in separate processes of one run. ~2 minutes on the H200.
# Runs from the repository root with the bundle (.gpubundle/gemm.tar.xz,
# carried) unpacked in /tmp/b; logs in $OUT (5 files), summary table last.
#   bash bench/gpu/run_gemm_device.sh
set -u
B=/tmp/b
if [ ! -x $B/bin/argen_bench ]; then mkdir -p $B && tar -xJf .gpubundle/gemm.tar.xz -C $B || exit 1; fi
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
export ARGEN_SOURCE_DIR=$PWD
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
t0=$(date +%s)
stamp() { echo "== $(( $(date +%s) - t0 )) s: $*"; }
run() { local log=$1 lim=$2; shift 2; stamp "$*" >>"$OUT/$log"; timeout "$lim" "$@" >>"$OUT/$log" 2>&1; echo "rc=$?" >>"$OUT/$log"; }
MODES="cublas lt-heuristic lt-tuned"
TMP=/tmp/gemm_runs; rm -rf $TMP; mkdir -p $TMP

nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$OUT/tests.log" 2>&1
run tests.log 60 $B/bin/cuda_gemm_test --gtest_brief=1
run tests.log 60 $B/bin/cuda_backend_test --gtest_brief=1

J="$OUT/results.jsonl"
# bench: LOG LIMIT TAG MODE ARGS... (stdout kept per run for the summary)
bench() {
  local log=$1 lim=$2 tag=$3 mode=$4; shift 4
  stamp "argen_bench $* --gemm $mode" >>"$OUT/$log"
  timeout "$lim" $B/bin/argen_bench "$@" --gemm "$mode" --out "$J" >"$TMP/$tag.$mode" 2>&1
  echo "rc=$?" >>"$TMP/$tag.$mode"
  cat "$TMP/$tag.$mode" >>"$OUT/$log"
}
for m in $MODES; do bench e2e_7b_48g.log 45 48g $m --model 7b --card-memory 48G --max-batch --policies dense,diagonal:0.95; done
for m in $MODES; do bench e2e_7b.log 50 b16_64 $m --model 7b --batches 16,64 --policies dense,diagonal:0.95; done
stamp done | tee -a "$OUT/tests.log"

{
  grep -h -E "PASSED|FAILED|rc=|tuning \]" "$OUT/tests.log"
  echo
  echo "gemm          run      policy          images  step_ms  img/s    qkv  o_proj    ffn  (stage ms: last steps, eager)"
  for tag in 48g b16_64; do
    for m in $MODES; do
      f="$TMP/$tag.$m"
      [ -f "$f" ] || continue
      awk -v m="$m" -v tag="$tag" '
        $1 == "7b" && $9 == "|" {
          printf "%-13s %-8s %-15s %6d %8.3f %6.2f %6.3f %7.3f %6.3f\n", m, tag, $2, $3, $6, $8, $12, $16, $17
          if ($2 == "dense") d = $8; else if ($2 ~ /^diagonal/) g = $8
        }
        /^gemm lt-tuned:/ { t = $0 }
        /^rc=/ && $0 != "rc=0" { printf "%-13s %-8s %s\n", m, tag, $0 }
        END {
          if (tag == "48g" && d > 0 && g > 0) printf "%-13s %-8s diagonal/dense img/s ratio %.3fx\n", m, tag, g / d
          if (t != "") printf "%-13s %-8s %s\n", m, tag, t
        }' "$f"
    done
  done
} | tee "$OUT/summary.txt"
