#!/usr/bin/env bash
# weight_dtype fp8 (e4m3 W8A8 layer projections), first device call: the gpu
# tests of the fp8 GEMM path (quantization bitwise against the host, the
# cuBLASLt product against float64, graph replay; the CUDA backend against the
# CPU reference with fp8 weights), one layer's four GEMMs bf16 against fp8,
# then argen_bench 7B with bf16 and fp8 weights in one process each (the same
# random weights, fp8 quantizes them): 1, 16, 64 and 128 images, the full
# H200 (prompt rows, as share_prompt_kv_across_requests serves lone images),
# the 48 GB card (the paper's N_r = 288, dense beside it), and the careful
# PyTorch loop (bf16) at 16 / 64 / 128 images in the same call.
# $OUT: tests.log gemm.txt bench.txt torch.txt summary.txt.
set -u
. bench/gpu/bundle_env.sh
use_bundle "${BUNDLE:-fp8w}" || exit 1
t0=$(date +%s); DEADLINE=${DEADLINE:-570}
. bench/gpu/time_guard.sh
{
  for t in cuda_gemm_test cuda_backend_test; do
    [ -x "$BIN/$t" ] || { echo "MISSING $t"; continue; }
    stamp "$t"; guarded 120 "$BIN/$t" --gtest_brief=1; echo "rc($t)=$?"
  done
} >"$OUT/tests.log" 2>&1
{
  stamp "one 7B layer's projections, bf16 / fp8"
  guarded 60 "$BIN/argen_bench" --model 7b --gemm-micro --gemm-rows 2,16,64,128,256,1024,2816
} >"$OUT/gemm.txt" 2>&1
{
  stamp "7B 1/16/64/128 images, bf16 / fp8 weights"
  guarded 150 "$BIN/argen_bench" --model 7b --batches 1,16,64,128 --policies dense,diagonal:0.95:64 \
    --weight-dtype auto,fp8 --stage-steps 4
  stamp "full H200, lone images with prompt rows, bf16 / fp8 weights"
  guarded 200 "$BIN/argen_bench" --model 7b --card-memory 139G --max-batch --max-rows 4096 \
    --policies diagonal:0.95:64 --prompt-sharing across --weight-dtype auto,fp8 --stage-steps 4
  stamp "48 GB card, N_r 288 and dense, bf16 / fp8 weights"
  guarded 100 "$BIN/argen_bench" --model 7b --card-memory 48G --max-batch --max-rows 1024 \
    --policies diagonal:0.95:288,dense --weight-dtype auto,fp8 --stage-steps 4
} >"$OUT/bench.txt" 2>&1
{
  stamp "careful PyTorch loop (bf16), 7B 16/64/128"
  guarded 100 python3 bench/gpu/torch_janus_loop.py --model 7b --batches 16,64,128
} >"$OUT/torch.txt" 2>&1
{
  grep -h -E "^MISSING|PASSED|FAILED|^rc\(|fp8 weights|\[ fp8 " "$OUT/tests.log" | cut -c1-200
  grep -h -E "^gemm " "$OUT/gemm.txt"
  grep -h -E "^== |^7b |^card|^model" "$OUT/bench.txt" | cut -c1-200
  grep -h -E "^== |^7b |^# " "$OUT/torch.txt" | cut -c1-160
  echo "total $(( $(date +%s) - t0 )) s"
} | tee "$OUT/summary.txt"
