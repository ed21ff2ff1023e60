#!/usr/bin/env bash
# The skinny decode GEMM (kernels/skinny_gemm.h) against cuBLAS on the H200, one
# call: its gpu tests and the backend's with it forced, the decode GEMMs alone
# (argen_bench --gemm-micro, 7B and 1B shapes, 1-16 images), 7B end to end with
# each (dense and diagonal 95%, 1, 8, 16 images), and the careful PyTorch loop at
# 16 images as the same-call baseline. $OUT: tests.log gemm.txt e2e.txt summary.txt.
# Bundle: as run_skinny_lumina_device.sh (.gpubundle/sk.tar.xz).
set -u
B=/tmp/sk
if [ ! -x $B/bin/argen_bench ]; then mkdir -p $B && xz -dc .gpubundle/sk.tar.xz | tar -xf - -C $B || exit 1; fi
BIN=$B/bin
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib:/usr/local/cuda/lib64
export ARGEN_SOURCE_DIR=$PWD
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
t0=$(date +%s)
DEADLINE=${DEADLINE:-300}
. bench/gpu/time_guard.sh

{
  for t in kernels_skinny_gemm_test cuda_gemm_test; do
    stamp "$t"
    guarded 60 "$BIN/$t" --gtest_brief=1
    echo "rc($t)=$?"
  done
  export ARGEN_CUDA_GEMM=skinny
  for t in cuda_backend_test lumina_cuda_test; do
    stamp "$t ARGEN_CUDA_GEMM=skinny"
    guarded 60 "$BIN/$t" --gtest_brief=1
    echo "rc($t,skinny)=$?"
  done
  unset ARGEN_CUDA_GEMM
} >"$OUT/tests.log" 2>&1

stamp gemm-micro >"$OUT/gemm.txt"
guarded 40 "$BIN/argen_bench" --gemm-micro --model 7b,1b --batches 1,2,4,8,16 >>"$OUT/gemm.txt" 2>&1
echo "rc=$?" >>"$OUT/gemm.txt"

{
  for g in cublas skinny; do
    stamp "e2e gemm $g"
    guarded 60 "$BIN/argen_bench" --model 7b --batches 1,8,16 --policies dense,diagonal:0.95 --gemm $g
    echo "rc(e2e,$g)=$?"
  done
  stamp "torch loop"
  guarded 60 python3 bench/gpu/torch_janus_loop.py --model 7b --batches 16
  echo "rc(torch)=$?"
} >"$OUT/e2e.txt" 2>&1

{
  echo "== gpu tests"
  grep -h -E "PASSED|FAILED|SKIPPED|^rc\(" "$OUT/tests.log"
  echo "== gemm micro (cublas/skinny > 1: skinny faster)"
  grep -h "^gemm " "$OUT/gemm.txt" | sed -E 's/^gemm ([^ ]+) rows=([0-9]+) ([a-z_]+) .*cublas ([0-9.]+) us \(([0-9]+) GB\/s\), skinny ([0-9.]+) us \(([0-9]+) GB\/s.*cublas\/skinny ([0-9.]+)x, max rel diff (.*)$/\1 rows \2 \3: cublas \4 us \5 GB\/s, skinny \6 us \7 GB\/s, \8x, diff \9/'
  grep -h -m1 -o "copy [0-9]* GB/s" "$OUT/gemm.txt"
  echo "== 7B end to end"
  grep -h -E "^(7b |rc\(|model policy)" "$OUT/e2e.txt" | cut -c1-150
  echo "total $(( $(date +%s) - t0 )) s"
} | tee "$OUT/summary.txt"
