#!/usr/bin/env bash
# One device run for issue #13 item 1 (the VQ-16 decoder on tensor cores) and the careful
# PyTorch loop baseline: the new GPU tests, argen_vq_bench fp32 / TF32 / bf16 at batch 1, 16, 64
# (384 px, then 192 px) beside PyTorch + cuDNN's decoder, and bench/gpu/torch_janus_loop.py
# beside argen_bench at the sizes (7B 16/64/128, 1B 64/128/256 images), then a table
# (bench/gpu/vq_device_table.py). Logs in $OUT, 8 files (the device tool returns at most 8):
# tests.log vq384.log vq192.log vq_more.log torch_vq384.log e2e.log results.jsonl table.txt. A time guard keeps the whole run under ~7.5 min:
# every step gets at most what is left, and steps are ordered by importance.
#
# Binaries: .gpubundle/bin + .gpubundle/lib (../shared/tools/gpu-bundle.sh), or .gpubundle/vq.tar.xz
# holding bin/ and lib/ (unpacked to /tmp/b). Needed: kernels_vq_nhwc_test cudnn_convs_test
# cuda_vq_bf16_test cuda_vq_decoder_test vq_backend_option_test argen_vq_bench argen_bench.
#   bash bench/gpu/run_vq_device.sh
set -u
if [ -f .gpubundle/vq.tar.xz ]; then
  B=/tmp/b
  [ -x $B/bin/argen_vq_bench ] || { mkdir -p $B && tar -xJf .gpubundle/vq.tar.xz -C $B; } || exit 1
else
  B=$PWD/.gpubundle
fi
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda-13.0/targets/x86_64-linux/lib:/usr/local/cuda/lib64
export ARGEN_SOURCE_DIR=$PWD
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
J="$OUT/results.jsonl"
t0=$(date +%s)
DEADLINE=${DEADLINE:-470}  # seconds for all steps
stamp() { echo "== $(( $(date +%s) - t0 )) s: $*"; }
# run LOG LIMIT CMD...: CMD with timeout min(LIMIT, time left); skipped when under 15 s are left.
run() {
  local log=$1 lim=$2; shift 2
  local left=$(( DEADLINE - ($(date +%s) - t0) ))
  if [ "$left" -lt 15 ]; then stamp "SKIPPED (time guard): $*" >>"$OUT/$log"; return; fi
  [ "$lim" -gt "$left" ] && lim=$left
  stamp "$*" >>"$OUT/$log"
  timeout "$lim" "$@" >>"$OUT/$log" 2>&1
  echo "rc=$?" >>"$OUT/$log"
}

{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  ls -l /usr/local/cuda/lib64/libcudnn.so* 2>&1 | head -3
  python3 -c "import torch; print('torch', torch.__version__, 'cuDNN', torch.backends.cudnn.version())"
} >"$OUT/tests.log" 2>&1

# 1. The new kernels and the bf16 path against float64 / the CPU decoder.
run tests.log 45 $B/bin/kernels_vq_nhwc_test --gtest_brief=1
run tests.log 45 $B/bin/cudnn_convs_test
run tests.log 120 $B/bin/cuda_vq_bf16_test
run tests.log 20 $B/bin/vq_backend_option_test --gtest_brief=1

# 2. The decoder at 384 px, batch 1/16/64: argen fp32 / TF32 / bf16, then PyTorch + cuDNN.
run vq384.log 150 $B/bin/argen_vq_bench --backend cuda --precision fp32,tf32,bf16 --batches 1,16,64 --runs 3 \
  --chunk 64 --workspace_mib 40000 --profile 1
run torch_vq384.log 100 python3 bench/gpu/torch_vq_bench.py --batches 1,16,64 --precisions fp32,tf32,bf16,bf16-cl

# 3. The careful PyTorch loop and argen_bench at the sizes.
run e2e.log 100 python3 bench/gpu/torch_janus_loop.py --model 7b --batches 16,64,128 --out "$J"
run e2e.log 90 $B/bin/argen_bench --model 7b --batches 16,64,128 --policies dense,diagonal:0.95 --out "$J"
run e2e.log 60 python3 bench/gpu/torch_janus_loop.py --model 1b --batches 64,128,256 --out "$J"
run e2e.log 60 $B/bin/argen_bench --model 1b --batches 64,128,256 --policies dense,diagonal:0.95 --out "$J"

# 4. Less important: memcheck of the new kernels and of one bf16 decode path (tiny model: cuDNN
# under memcheck is slow), 192 px, cuDNN's heuristic choice and a 2 GiB workspace against the
# defaults, the fp32 path's test.
CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
run tests.log 60 $CS --tool memcheck --error-exitcode 9 $B/bin/kernels_vq_nhwc_test --gtest_brief=1
run tests.log 90 $CS --tool memcheck --error-exitcode 9 $B/bin/cuda_vq_bf16_test --gtest_brief=1 \
  --gtest_filter='TinyCheckpoints/GoldenBf16Test.MatchesCpu/Mha'
run vq192.log 45 $B/bin/argen_vq_bench --backend cuda --image_size 192 --precision fp32,bf16 --batches 1,16,64 \
  --runs 3 --chunk 64 --workspace_mib 16000
run vq_more.log 40 $B/bin/argen_vq_bench --backend cuda --precision bf16 --algo heuristic --batches 64 \
  --runs 3 --chunk 64 --workspace_mib 40000
run vq_more.log 40 $B/bin/argen_vq_bench --backend cuda --precision bf16 --cudnn_ws_mib 2048 --batches 64 \
  --runs 3 --chunk 64 --workspace_mib 40000
run tests.log 90 $B/bin/cuda_vq_decoder_test --gtest_brief=1

stamp done | tee -a "$OUT/tests.log"
grep -h -E "^\[  (PASSED|FAILED)|FAILED  \]|rc=|bf16 GPU vs CPU|SKIPPED|ERROR SUMMARY" "$OUT/tests.log" | head -50
grep -h -E "^cuda-[a-z0-9]+: " "$OUT/vq384.log" | cut -c1-400
python3 bench/gpu/vq_device_table.py "$OUT" | tee "$OUT/table.txt"
