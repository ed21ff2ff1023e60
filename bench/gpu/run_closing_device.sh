#!/usr/bin/env bash
# The closing device run of the fourth session (2026-12-01): every gpu test
# binary on the committed main (fp8 KV and the warp attention kernel in), then
# Lumina-mGPT-7B at 768 px and the paper's batch (dense vs diagonal 95%: the
# #18 figures with the warp kernel), and Janus-Pro-7B at 16 and 64 images
# beside the careful PyTorch loop in the same call (bf16 and fp8 KV).
# $OUT: tests.log lumina.txt janus.txt summary.txt.
set -u
. bench/gpu/bundle_env.sh
use_bundle "${BUNDLE:-closing}" || exit 1
export ARGEN_SERVER_BIN=$BIN/argen_server
t0=$(date +%s); DEADLINE=${DEADLINE:-530}
. bench/gpu/time_guard.sh
{
  for t in kernels_elementwise_test kernels_attention_test kernels_attention_fp8_test kernels_kv_fp8_conversion_test \
           kernels_sampling_test kernels_vq_nhwc_test kernels_policy_test cuda_gemm_test cuda_backend_test \
           cuda_stack_switches_test cuda_auto_sizing_test cuda_vq_decoder_test cudnn_convs_test gpu_faults_test; do
    [ -x "$BIN/$t" ] || { echo "MISSING $t"; continue; }
    # models/ stays behind (the carry limit): the shipped-model VQ cases are left out.
    filter='*'; [ "$t" = cuda_vq_decoder_test ] && filter='-*ShippedModel*'
    stamp "$t"; guarded 60 "$BIN/$t" --gtest_brief=1 --gtest_filter="$filter"; echo "rc($t)=$?"
  done
} >"$OUT/tests.log" 2>&1
{
  stamp lumina-768
  guarded 140 "$BIN/argen_bench" --model lumina-768 --batches 16 --policies dense,diagonal:0.95 --prompt-len 40 --stage-steps 4
} >"$OUT/lumina.txt" 2>&1
{
  stamp janus
  guarded 70 "$BIN/argen_bench" --model 7b --batches 16,64 --policies dense,dense@fp8,diagonal:0.95,diagonal:0.95@fp8
  stamp "torch loop"
  guarded 90 python3 bench/gpu/torch_janus_loop.py --model 7b --batches 16,64
} >"$OUT/janus.txt" 2>&1
{
  grep -h -E "^MISSING|PASSED|FAILED|^rc\(" "$OUT/tests.log"
  grep -h -E "^== |^(lumina-|7b )|img/s" "$OUT/lumina.txt" "$OUT/janus.txt" | cut -c1-175
  echo "total $(( $(date +%s) - t0 )) s"
} | tee "$OUT/summary.txt"
