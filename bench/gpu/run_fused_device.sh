#!/usr/bin/env bash
# One device run for the fused-argmin / staged-kernel work: GPU tests, memcheck
# of the new device code, the attention micro A/B (two-pass vs staged) and the
# end-to-end lines. Runs from the repository root on the device with the
# bundle (.gpubundle/fused.tar.xz, carried) unpacked in /tmp/b; logs in $OUT.
# (The policy kernels test is kernels_policy_test since they moved to kernels/.)
#   bash bench/gpu/run_fused_device.sh
set -u
B=/tmp/b
if [ ! -x $B/bin/argen_bench ]; then mkdir -p $B && tar -xJf .gpubundle/fused.tar.xz -C $B || exit 1; fi
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib
export ARGEN_SOURCE_DIR=$PWD
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
t0=$(date +%s)
stamp() { echo "== $(( $(date +%s) - t0 )) s: $*"; }
run() { local log=$1 lim=$2; shift 2; stamp "$*" >>"$OUT/$log"; timeout "$lim" "$@" >>"$OUT/$log" 2>&1; echo "rc=$?" >>"$OUT/$log"; }

nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$OUT/tests.log" 2>&1
run tests.log 60 $B/bin/kernels_attention_test --gtest_brief=1
run tests.log 60 $B/bin/kernels_policy_test --gtest_brief=1
run tests.log 90 $B/bin/cuda_backend_test --gtest_brief=1

CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
run sanitizer.log 45 $CS --tool memcheck --error-exitcode 9 $B/bin/kernels_policy_test --gtest_brief=1 \
  --gtest_filter='*Diagonal*:*diagonal*:*h2o*'
run sanitizer.log 45 $CS --tool memcheck --error-exitcode 9 $B/bin/kernels_attention_test --gtest_brief=1 \
  --gtest_filter='*staged*:*twopass*'

J="$OUT/results.jsonl"
run micro.log 60 $B/bin/argen_bench --model 7b --batches 32,64 --attention-micro \
  --policies diagonal:0.95,diagonal:0.9,diagonal:0.8 --out "$J"
run e2e_7b_48g.log 150 $B/bin/argen_bench --model 7b --card-memory 48G --max-batch --policies dense,diagonal:0.95 --out "$J"
run e2e_7b.log 100 $B/bin/argen_bench --model 7b --batches 16,64 --policies dense,diagonal:0.95 --out "$J"
# A/B in the engine, 7B / 64 images, diagonal 95%: the earlier path (two-pass kernel,
# probs + per-layer ObserveKernel), then the two-pass kernel with the fused argmin.
run e2e_7b.log 40 $B/bin/argen_bench --model 7b --batches 64 --policies diagonal:0.95 --attention-kernel two-pass --no-fused-argmin
run e2e_7b.log 40 $B/bin/argen_bench --model 7b --batches 64 --policies diagonal:0.95 --attention-kernel two-pass
run e2e_1b.log 70 $B/bin/argen_bench --model 1b --batches 16,64,128 --policies dense,diagonal:0.95 --out "$J"
stamp done | tee -a "$OUT/tests.log"
grep -h -E "PASSED|FAILED|rc=|ERROR SUMMARY" "$OUT/tests.log" "$OUT/sanitizer.log"
grep -h "^attention" "$OUT/micro.log"
