#!/usr/bin/env bash
# One device run for the families / one-decoder-stack work (issue #11): every
# gpu-labelled test, then an old-vs-new argen_bench A/B in the same call (7B,
# 16 and 64 images, dense and diagonal:0.95; two interleaved runs of each
# binary, the better of each), with a table of img/s and step time and the
# ratio new/old (the brief's bar: within 5%). Runs from the repository root on
# the device with the binaries in .gpubundle/bin and their libraries in
# .gpubundle/lib (/work/shared/tools/gpu-bundle.sh; carry .gpubundle). Logs in $OUT
# (tests.log, ab.log, ab_{old,new}_{1,2}.txt, summary.txt: 8 files at most).
#
#   bash bench/gpu/run_families_device.sh [OLD_ARGEN_BENCH]
#     OLD_ARGEN_BENCH: main's argen_bench (default $OLD_ARGEN_BENCH, else
#     the bundle's bin/argen_bench_old); the new one is the bundle's bin/argen_bench.
#
# Bundle (on the development machine, after building both trees). The
# directory is ~100 MB, over the 64 MiB that travels, so pack it (~17 MB as
# .tar.xz); the script unpacks .gpubundle/families.tar.xz to /tmp/b on the device:
#   /work/shared/tools/gpu-bundle.sh /tmp/fb build/bench/gpu/argen_bench \
#     build/kernels/tests/{kernels_elementwise_test,kernels_attention_test,kernels_sampling_test,kernels_vq_nhwc_test,kernels_policy_test} \
#     build/engine/cuda/tests/{cuda_gemm_test,cuda_backend_test,cuda_stack_switches_test} \
#     build/engine/vq_cuda/tests/{cuda_vq_decoder_test,cuda_vq_bf16_test,cudnn_convs_test,vq_backend_option_test}
#   cp <main's build>/bench/gpu/argen_bench /tmp/fb/bin/argen_bench_old
#   mkdir -p .gpubundle && tar -cJf .gpubundle/families.tar.xz -C /tmp/fb bin lib
# A time guard keeps the whole run under DEADLINE seconds (default 560): every
# step gets at most what is left.
set -u
if [ -f .gpubundle/families.tar.xz ]; then
  B=/tmp/b
  [ -x $B/bin/argen_bench ] || { mkdir -p $B && tar -xJf .gpubundle/families.tar.xz -C $B; } || exit 1
else
  B=$PWD/.gpubundle
fi
BIN=$B/bin
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib:/usr/local/cuda/lib64
export ARGEN_SOURCE_DIR=$PWD
OLD=${1:-${OLD_ARGEN_BENCH:-$BIN/argen_bench_old}}
NEW=$BIN/argen_bench
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
t0=$(date +%s)
DEADLINE=${DEADLINE:-560}
. bench/gpu/time_guard.sh  # stamp, guarded (run from the repository root)

# Every gpu-labelled test (ctest -L gpu), and the CUDA case of the vq_backend option test.
GPU_TESTS="kernels_elementwise_test kernels_attention_test kernels_sampling_test kernels_vq_nhwc_test
  kernels_policy_test cuda_gemm_test cuda_backend_test cuda_stack_switches_test cuda_vq_decoder_test
  cuda_vq_bf16_test cudnn_convs_test vq_backend_option_test"
{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv
  for t in $GPU_TESTS; do
    if [ ! -x "$BIN/$t" ]; then echo "MISSING $t"; continue; fi
    stamp "$t"
    guarded 120 "$BIN/$t" --gtest_brief=1
    echo "rc($t)=$?"
  done
} >"$OUT/tests.log" 2>&1

# The A/B: old and new interleaved, twice each, one process per run.
ARGS="--model 7b --batches 16,64 --policies dense,diagonal:0.95"
: >"$OUT/ab.log"
for rep in 1 2; do
  for which in old new; do
    bin=$OLD
    [ "$which" = new ] && bin=$NEW
    if [ ! -x "$bin" ]; then echo "MISSING $which argen_bench ($bin)" >>"$OUT/ab.log"; continue; fi
    stamp "$which rep $rep: $bin $ARGS" >>"$OUT/ab.log"
    guarded 150 "$bin" $ARGS >"$OUT/ab_${which}_$rep.txt" 2>&1
    echo "rc=$?" >>"$OUT/ab_${which}_$rep.txt"
    cat "$OUT/ab_${which}_$rep.txt" >>"$OUT/ab.log"
  done
done
stamp done >>"$OUT/ab.log"

{
  echo "== gpu tests"
  grep -h -E "^MISSING|PASSED|FAILED|SKIPPED|^rc\(" "$OUT/tests.log"
  echo
  echo "== argen_bench A/B (7B; the better of 2 runs each; ratio = new / old img/s, bar 0.95)"
  printf "%-16s %6s %10s %10s %10s %10s %7s\n" policy images old_img/s new_img/s old_step new_step ratio
  # Lines: model policy images prefill_s decode_s step_ms last_ms img/s | stages...
  awk '
    FNR == 1 { which = FILENAME ~ /ab_new_/ ? "new" : "old" }
    $1 == "7b" && $9 == "|" {
      k = $2 " " $3
      if ($8 > best[which, k]) { best[which, k] = $8; step[which, k] = $6 }
      keys[k] = 1
    }
    END {
      worst = 99
      for (k in keys) {
        split(k, p, " ")
        o = best["old", k]; n = best["new", k]
        r = (o > 0) ? n / o : 0
        if (r < worst) worst = r
        printf "T %-16s %6d %10.2f %10.2f %10.3f %10.3f %7.3f%s\n", p[1], p[2], o, n, step["old", k], step["new", k], r,
               (r < 0.95 ? "  <-- below 0.95" : "")
      }
      if (worst == 99) print "W no A/B lines parsed (see ab.log)"
      else printf "W worst ratio %.3f: %s\n", worst, (worst >= 0.95 ? "within 5%" : "REGRESSION")
    }' "$OUT"/ab_old_*.txt "$OUT"/ab_new_*.txt | sort | sed 's/^[TW] //'
} | tee "$OUT/summary.txt"
