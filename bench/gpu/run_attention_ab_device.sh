#!/usr/bin/env bash
# Decode attention with the slot positions resolved up front (kernels/attention.cu,
# 2026-12-01) against the kernel before it, on one H200 in one call: the kernel
# gpu tests and the backends' (every policy's attended sets against the host),
# the attention kernel alone (argen_bench --attention-micro, Lumina-mGPT-7B 768 px
# and 512 px, Janus-Pro-7B), then the engine with each binary: Lumina-mGPT-7B at
# the paper's batch (16 images; 8 as before) at 768 and 512 px, dense vs diagonal
# 95% (last-step attention stage and per-image latency), and Janus-Pro-7B at 16
# and 64 images beside the careful PyTorch loop.
# $BASE: the argen_bench built from the commit before (bin/argen_bench_base).
# $OUT: tests.log micro.txt lumina.txt janus.txt summary.txt.
set -u
. bench/gpu/bundle_env.sh
use_bundle at || exit 1
t0=$(date +%s)
DEADLINE=${DEADLINE:-420}
. bench/gpu/time_guard.sh

{
  for t in kernels_attention_test kernels_policy_test cuda_backend_test cuda_stack_switches_test lumina_cuda_test; do
    [ -x "$BIN/$t" ] || { echo "MISSING $t"; continue; }
    stamp "$t"
    guarded 60 "$BIN/$t" --gtest_brief=1
    echo "rc($t)=$?"
  done
} >"$OUT/tests.log" 2>&1

{
  for v in base new; do
    b=$BIN/argen_bench; [ $v = base ] && b=$BIN/argen_bench_base
    stamp "micro $v"
    guarded 30 "$b" --attention-micro --model lumina-768 --batches 1,8,16,32 --policies diagonal:0.95 --prompt-len 40
    guarded 30 "$b" --attention-micro --model lumina-512 --batches 1,8,16 --policies diagonal:0.95 --prompt-len 40
    guarded 30 "$b" --attention-micro --model 7b --batches 1,16,64 --policies diagonal:0.95
  done
} >"$OUT/micro.txt" 2>&1

{
  for v in new base; do
    b=$BIN/argen_bench; [ $v = base ] && b=$BIN/argen_bench_base
    stamp "lumina $v"
    guarded 70 "$b" --model lumina-768 --batches 8,16 --policies dense,diagonal:0.95 --prompt-len 40 --stage-steps 4
    guarded 40 "$b" --model lumina-512 --batches 8,16 --policies dense,diagonal:0.95 --prompt-len 40 --stage-steps 4
  done
} >"$OUT/lumina.txt" 2>&1

{
  for v in new base; do
    b=$BIN/argen_bench; [ $v = base ] && b=$BIN/argen_bench_base
    stamp "janus $v"
    guarded 60 "$b" --model 7b --batches 16,64 --policies dense,diagonal:0.95
  done
  stamp "torch loop"
  guarded 70 python3 bench/gpu/torch_janus_loop.py --model 7b --batches 16,64
} >"$OUT/janus.txt" 2>&1

{
  echo "== gpu tests"
  grep -h -E "^MISSING|PASSED|FAILED|SKIPPED|^rc\(" "$OUT/tests.log"
  echo "== attention kernel alone (base = before, new = positions up front)"
  awk '/^== .* micro /{v=$NF} /^attention .*two-pass/{print v": "$0}' "$OUT/micro.txt" | cut -c1-170
  echo "== engine (first block new, second base)"
  grep -h -E "^== |^(lumina-|7b )" "$OUT/lumina.txt" "$OUT/janus.txt" | cut -c1-175
  echo "total $(( $(date +%s) - t0 )) s"
} | tee "$OUT/summary.txt"
