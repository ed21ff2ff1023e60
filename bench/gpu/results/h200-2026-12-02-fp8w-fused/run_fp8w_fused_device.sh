#!/usr/bin/env bash
# weight_dtype fp8 with the fused fp8-input kernels (RMSNorm and SwiGLU write
# the GEMMs' e4m3 inputs themselves), one device call: the gpu tests (fused
# kernels bitwise against bf16 + QuantizeRowsE4m3, the backend's logits fused
# against unfused bit for bit, the fp8 GEMM against float64, the backend
# against the CPU reference), then argen_bench 7B: the full H200 with lone
# images and prompt rows, bf16 / fp8 fused in one process and fp8 unfused in
# the next; dense at the full H200; 64 and 128 images; the careful PyTorch
# loop (bf16) beside them. $OUT: tests.log bench.txt torch.txt summary.txt.
set -u
. bench/gpu/bundle_env.sh
use_bundle "${BUNDLE:-fp8wfused}" || exit 1
t0=$(date +%s); DEADLINE=${DEADLINE:-450}
. bench/gpu/time_guard.sh
{
  for t in kernels_elementwise_test cuda_gemm_test cuda_backend_test; do
    [ -x "$BIN/$t" ] || { echo "MISSING $t"; continue; }
    stamp "$t"; guarded 90 "$BIN/$t" --gtest_brief=1; echo "rc($t)=$?"
  done
} >"$OUT/tests.log" 2>&1
{
  stamp "full H200, lone images with prompt rows: bf16 / fp8 (fused inputs)"
  guarded 150 "$BIN/argen_bench" --model 7b --card-memory 139G --max-batch --max-rows 4096 \
    --policies diagonal:0.95:64 --prompt-sharing across --weight-dtype auto,fp8 --stage-steps 4
  stamp "full H200, lone images with prompt rows: fp8 (unfused inputs, the baseline)"
  guarded 80 "$BIN/argen_bench" --model 7b --card-memory 139G --max-batch --max-rows 4096 \
    --policies diagonal:0.95:64 --prompt-sharing across --weight-dtype fp8 --no-fused-fp8-inputs --stage-steps 4
  stamp "full H200 dense, prompt rows: bf16 / fp8"
  guarded 60 "$BIN/argen_bench" --model 7b --card-memory 139G --max-batch --max-rows 4096 \
    --policies dense --prompt-sharing across --weight-dtype auto,fp8 --stage-steps 4
  stamp "7B 64/128 images: bf16 / fp8"
  guarded 60 "$BIN/argen_bench" --model 7b --batches 64,128 --policies dense,diagonal:0.95:64 \
    --weight-dtype auto,fp8 --stage-steps 4
} >"$OUT/bench.txt" 2>&1
{
  stamp "careful PyTorch loop (bf16), 7B 64/128"
  guarded 60 python3 bench/gpu/torch_janus_loop.py --model 7b --batches 64,128
} >"$OUT/torch.txt" 2>&1
{
  grep -h -E "^MISSING|PASSED|FAILED|^rc\(|fp8 weights 1" "$OUT/tests.log" | cut -c1-200
  grep -h -E "^== |^7b |^card" "$OUT/bench.txt" | cut -c1-210
  grep -h -E "^== |^7b " "$OUT/torch.txt" | cut -c1-160
  echo "total $(( $(date +%s) - t0 )) s"
} | tee "$OUT/summary.txt"
