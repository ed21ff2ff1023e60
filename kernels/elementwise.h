// Small memory-bound kernels of the decode step. bf16 storage, fp32 math.
// Every launcher returns the launch error (cudaSuccess when queued).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/token_meta.h"

namespace argen::kernels {

using bf16 = __nv_bfloat16;

// out[r] = table[ids[r]] (rows of `dim`); ids outside [0, vocab) give zero rows.
cudaError_t EmbeddingGatherF32(const bf16* table, int64_t vocab, int dim, const int32_t* ids, int rows, float* out,
                               cudaStream_t stream);
cudaError_t EmbeddingGatherBf16(const bf16* table, int64_t vocab, int dim, const int32_t* ids, int rows, bf16* out,
                                cudaStream_t stream);

// out = GELU_erf(x + bias) as bf16 (the aligner's and gen_head's hidden activation).
cudaError_t BiasGelu(const float* x, const float* bias, int rows, int n, bf16* out, cudaStream_t stream);
// x += bias, in place (fp32 rows of n).
cudaError_t AddBias(float* x, const float* bias, int rows, int n, cudaStream_t stream);
// y += x (fp32), the residual add where it is not fused into a GEMM epilogue.
cudaError_t AddInPlace(float* y, const float* x, int64_t n, cudaStream_t stream);

// out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight, written as bf16 (GEMM input).
cudaError_t RmsNorm(const float* x, const float* weight, int rows, int dim, float eps, bf16* out, cudaStream_t stream);

// out[r] = (x[r] - mean) / sqrt(var + eps) * weight + bias (torch LayerNorm,
// biased variance), written as bf16 (GEMM input).
cudaError_t LayerNorm(const float* x, const float* weight, const float* bias, int rows, int dim, float eps, bf16* out,
                      cudaStream_t stream);

// The swin-norm residual: x[r] += norm(y[r]) in place (fp32), with norm the
// RMSNorm (bias null) or the LayerNorm above, then x_bf16[r] = bf16(x[r])
// (the next GEMM's input). One block per row.
cudaError_t AddNorm(const float* y, const float* weight, const float* bias, int rows, int dim, float eps, float* x,
                    bf16* x_bf16, cudaStream_t stream);

// out[i] = bf16(x[i]).
cudaError_t ConvertToBf16(const float* x, int64_t n, bf16* out, cudaStream_t stream);

// QK-norm (HF ChameleonLayerNorm) in place on the fp32 q|k|v rows
// [tokens][(heads + 2*kv_heads) * head_dim]: every q head and every k head
// goes through a LayerNorm over head_dim with its own weight and bias
// (q_weight[h * head_dim + i], ...); v is untouched. One warp per (token, head).
struct HeadLayerNormArgs {
  float* qkv = nullptr;
  int32_t tokens = 0, heads = 0, kv_heads = 0, head_dim = 0;
  const float* q_weight = nullptr;
  const float* q_bias = nullptr;
  const float* k_weight = nullptr;
  const float* k_bias = nullptr;
  float eps = 1e-5f;
};
cudaError_t HeadLayerNorm(const HeadLayerNormArgs& args, cudaStream_t stream);

// gate_up: fp32 [rows][2*inter] (gate first, then up); out = silu(gate) * up as bf16.
cudaError_t SwiGlu(const float* gate_up, int rows, int inter, bf16* out, cudaStream_t stream);

// dst[i] = src[rows[i]] for fp32 rows of `dim` (pair -> row broadcast, last-token gather).
cudaError_t GatherRowsF32(const float* src, const int32_t* rows, int n, int dim, float* dst, cudaStream_t stream);

// Rotary embedding (HF rotate_half convention: pair i is (i, i + head_dim/2);
// `interleaved`: (2i, 2i + 1), LlamaGen's) and KV append.
// qkv: fp32 [tokens][(heads + 2*kv_heads) * head_dim] (q, then k, then v).
// rope: fp32 [max_pos][head_dim/2][2] = (cos, sin) of rope_pos * inv_freq[i].
// Writes the rotated queries to q_out [tokens][heads][head_dim] (fp32) and the
// rotated key and the value of layer `layer` to the token's region at kv_index,
// or, for kTokenSparse tokens, at decode_base + write_slots[t][kv_head]. A
// kTokenKvFp8 token's region is fp8 (kernels/kv_fp8.h): its key and value are
// written as e4m3 codes with one scale each per kv head.
struct RopeAppendArgs {
  const float* qkv = nullptr;
  const float* rope = nullptr;
  int32_t max_pos = 0;
  const TokenMeta* meta = nullptr;
  int32_t tokens = 0;
  int32_t heads = 0, kv_heads = 0, head_dim = 0, num_layers = 0, layer = 0;
  const int32_t* write_slots = nullptr;  // [tokens][kv_heads] of this layer (sparse tokens)
  bool interleaved = false;
  float* q_out = nullptr;
  bf16* kv_pool = nullptr;
};
cudaError_t RopeAppend(const RopeAppendArgs& args, cudaStream_t stream);

}  // namespace argen::kernels
