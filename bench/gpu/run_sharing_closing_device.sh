#!/usr/bin/env bash
# Closing call of the prompt-KV sharing session, on the final code: every gpu
# test binary (20; models/argen-lumina-scenes-v1 travels for lumina_cuda_test,
# the shipped Janus model does not: its VQ cases are left out), then Lumina-mGPT
# 768 px at the paper's batch, 4 images a prompt, sharing off / on.
# $OUT: tests.log lumina.txt summary.txt.
set -u
. bench/gpu/bundle_env.sh
use_bundle "${BUNDLE:-final}" || exit 1
export ARGEN_SERVER_BIN=$BIN/argen_server
t0=$(date +%s); DEADLINE=${DEADLINE:-500}
. bench/gpu/time_guard.sh
{
  for t in kernels_elementwise_test kernels_attention_test kernels_attention_fp8_test kernels_attention_shared_prompt_test \
           kernels_kv_fp8_conversion_test kernels_sampling_test kernels_vq_nhwc_test kernels_policy_test cuda_gemm_test \
           cuda_backend_test cuda_prompt_sharing_test cuda_stack_switches_test cuda_auto_sizing_test cuda_vq_decoder_test \
           cudnn_convs_test cuda_vq_bf16_test lumina_cuda_test gpu_faults_test; do
    [ -x "$BIN/$t" ] || { echo "MISSING $t"; continue; }
    filter='*'
    case $t in cuda_vq_decoder_test|cuda_vq_bf16_test) filter='-*Shipped*' ;; esac
    stamp "$t"; guarded 90 "$BIN/$t" --gtest_brief=1 --gtest_filter="$filter"; echo "rc($t)=$?"
  done
} >"$OUT/tests.log" 2>&1
{
  stamp "lumina-768, 16 images, 4 a prompt: sharing off / on"
  guarded 150 "$BIN/argen_bench" --model lumina-768 --batches 16 --policies diagonal:0.95 --prompt-len 40 \
    --images-per-prompt 4 --prompt-sharing both --stage-steps 4
} >"$OUT/lumina.txt" 2>&1
{
  grep -h -E "^MISSING|PASSED|FAILED|^rc\(" "$OUT/tests.log"
  grep -h -E "^== |^lumina-" "$OUT/lumina.txt" | cut -c1-175
  echo "total $(( $(date +%s) - t0 )) s"
} | tee "$OUT/summary.txt"
