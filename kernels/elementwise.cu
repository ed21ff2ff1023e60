// Embedding gather, bias + GELU, RMSNorm / LayerNorm (+ the swin residual),
// QK-norm, SwiGLU, residual add, RoPE + KV append.
#include "kernels/common.cuh"
#include "kernels/elementwise.h"
#include "kernels/kv_fp8.h"
#include "kernels/pdl.cuh"

namespace argen::kernels {
namespace {

constexpr int kThreads = 256;

int Blocks(int64_t n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

template <typename Out>
__device__ __forceinline__ Out FromFloat(float v);
template <>
__device__ __forceinline__ float FromFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ bf16 FromFloat<bf16>(float v) {
  return __float2bfloat16(v);
}

template <typename Out>
__global__ void EmbeddingGatherKernel(const bf16* table, int64_t vocab, int dim, const int32_t* ids, Out* out) {
  const int row = blockIdx.x;
  const int32_t id = ids[row];
  const bool valid = id >= 0 && id < vocab;
  const bf16* src = table + (valid ? static_cast<int64_t>(id) * dim : 0);
  Out* dst = out + static_cast<int64_t>(row) * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) dst[i] = FromFloat<Out>(valid ? __bfloat162float(src[i]) : 0.f);
}

__global__ void BiasGeluKernel(const float* x, const float* bias, int64_t total, int n, bf16* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const float v = x[i] + bias[i % n];
  out[i] = __float2bfloat16(0.5f * v * (1.f + erff(v * 0.70710678118654752f)));
}

__global__ void AddBiasKernel(float* x, const float* bias, int64_t total, int n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < total) x[i] += bias[i % n];
}

__global__ void AddInPlaceKernel(float* y, const float* x, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i];
}

__global__ void RmsNormKernel(const float* x, const float* weight, int dim, float eps, bf16* out) {
  __shared__ float scratch[32];
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * dim;
  bf16* yr = out + static_cast<int64_t>(blockIdx.x) * dim;
  float ss = 0.f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) ss += xr[i] * xr[i];
  ss = detail::BlockSum(ss, scratch);
  const float inv = rsqrtf(ss / dim + eps);
  for (int i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = __float2bfloat16(xr[i] * inv * weight[i]);
}

// Mean and 1/sqrt(var + eps) of one row (block-wide; every thread gets them).
__device__ __forceinline__ void RowMoments(const float* xr, int dim, float eps, float* scratch, float* mean,
                                           float* inv) {
  float sum = 0.f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) sum += xr[i];
  const float m = detail::BlockSum(sum, scratch) / dim;
  float sq = 0.f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    const float d = xr[i] - m;
    sq += d * d;
  }
  *mean = m;
  *inv = rsqrtf(detail::BlockSum(sq, scratch) / dim + eps);
}

__global__ void LayerNormKernel(const float* x, const float* weight, const float* bias, int dim, float eps, bf16* out) {
  __shared__ float scratch[32];
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * dim;
  bf16* yr = out + static_cast<int64_t>(blockIdx.x) * dim;
  float mean = 0.f, inv = 0.f;
  RowMoments(xr, dim, eps, scratch, &mean, &inv);
  for (int i = threadIdx.x; i < dim; i += blockDim.x)
    yr[i] = __float2bfloat16((xr[i] - mean) * inv * weight[i] + bias[i]);
}

__global__ void AddNormKernel(const float* y, const float* weight, const float* bias, int dim, float eps, float* x,
                              bf16* x_bf16) {
  __shared__ float scratch[32];
  const int64_t row = static_cast<int64_t>(blockIdx.x) * dim;
  const float* yr = y + row;
  float* xr = x + row;
  bf16* br = x_bf16 + row;
  if (bias == nullptr) {  // RMSNorm
    float ss = 0.f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) ss += yr[i] * yr[i];
    const float inv = rsqrtf(detail::BlockSum(ss, scratch) / dim + eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
      const float v = xr[i] + yr[i] * inv * weight[i];
      xr[i] = v;
      br[i] = __float2bfloat16(v);
    }
  } else {  // LayerNorm
    float mean = 0.f, inv = 0.f;
    RowMoments(yr, dim, eps, scratch, &mean, &inv);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
      const float v = xr[i] + ((yr[i] - mean) * inv * weight[i] + bias[i]);
      xr[i] = v;
      br[i] = __float2bfloat16(v);
    }
  }
}

__global__ void ConvertToBf16Kernel(const float* x, int64_t n, bf16* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) out[i] = __float2bfloat16(x[i]);
}

// One warp per (token, head) of q (heads first) and k; lanes stride head_dim.
__global__ void HeadLayerNormKernel(HeadLayerNormArgs a) {
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  const int per_token = a.heads + a.kv_heads;
  if (warp >= static_cast<int64_t>(a.tokens) * per_token) return;  // uniform per warp
  const int t = static_cast<int>(warp / per_token), h = static_cast<int>(warp % per_token);
  const int hd = a.head_dim;
  const int64_t stride = static_cast<int64_t>(a.heads + 2 * a.kv_heads) * hd;
  // k heads follow the q heads in the row: head h starts at h * head_dim either way.
  float* v = a.qkv + t * stride + static_cast<int64_t>(h) * hd;
  const bool is_q = h < a.heads;
  const int own = is_q ? h : h - a.heads;
  const float* w = (is_q ? a.q_weight : a.k_weight) + static_cast<int64_t>(own) * hd;
  const float* b = (is_q ? a.q_bias : a.k_bias) + static_cast<int64_t>(own) * hd;
  float sum = 0.f;
  for (int i = lane; i < hd; i += 32) sum += v[i];
  const float mean = detail::WarpSum(sum) / hd;
  float sq = 0.f;
  for (int i = lane; i < hd; i += 32) {
    const float d = v[i] - mean;
    sq += d * d;
  }
  const float inv = rsqrtf(detail::WarpSum(sq) / hd + a.eps);
  for (int i = lane; i < hd; i += 32) v[i] = (v[i] - mean) * inv * w[i] + b[i];
}

__global__ void SwiGluKernel(const float* gate_up, int inter, int64_t total, bf16* out) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const int64_t r = i / inter, c = i % inter;
  const float g = gate_up[r * 2 * inter + c], u = gate_up[r * 2 * inter + inter + c];
  out[i] = __float2bfloat16(g / (1.f + expf(-g)) * u);
}

__global__ void GatherRowsKernel(const float* src, const int32_t* rows, int dim, float* dst) {
  const float* s = src + static_cast<int64_t>(rows[blockIdx.x]) * dim;
  float* d = dst + static_cast<int64_t>(blockIdx.x) * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) d[i] = s[i];
}

// One block per token, one thread per rotary pair (head, i) of q and k; v is copied.
// The fp8 append: one warp per kv head finds the largest magnitude of the
// rotated key (and of the value), then writes e4m3 codes and the scales.
__device__ void RopeAppendFp8(const RopeAppendArgs& a, const TokenMeta& m, const float* row, const float* cs,
                              bool sparse, int t) {
  const int half = a.head_dim / 2, hd = a.head_dim;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  unsigned char* region = reinterpret_cast<unsigned char*>(a.kv_pool + m.kv_offset);
  const Fp8KvRegion r = Fp8Region(a.num_layers, a.kv_heads, m.capacity, hd);
  for (int h = warp; h < a.kv_heads; h += warps) {
    const int kv_index = sparse ? m.decode_base + a.write_slots[static_cast<int64_t>(t) * a.kv_heads + h] : m.kv_index;
    if (kv_index < 0 || kv_index >= m.capacity) continue;  // uniform over the warp
    const float* ks = row + (a.heads + h) * hd;
    const float* vs = row + (a.heads + a.kv_heads + h) * hd;
    float k_amax = 0.f, v_amax = 0.f;
    for (int i = lane; i < half; i += 32) {
      const int e0 = a.interleaved ? 2 * i : i, e1 = a.interleaved ? 2 * i + 1 : i + half;
      const float c = cs[2 * i], s = cs[2 * i + 1], x0 = ks[e0], x1 = ks[e1];
      k_amax = fmaxf(k_amax, fmaxf(fabsf(x0 * c - x1 * s), fabsf(x1 * c + x0 * s)));
      v_amax = fmaxf(v_amax, fmaxf(fabsf(vs[i]), fabsf(vs[i + half])));
    }
    const float k_scale = E4m3Scale(detail::WarpMax(k_amax)), v_scale = E4m3Scale(detail::WarpMax(v_amax));
    const int64_t vector = (static_cast<int64_t>(a.layer) * a.kv_heads + h) * m.capacity + kv_index;
    unsigned char* k_codes = region + vector * hd;
    unsigned char* v_codes = region + r.v_codes + vector * hd;
    for (int i = lane; i < half; i += 32) {
      const int e0 = a.interleaved ? 2 * i : i, e1 = a.interleaved ? 2 * i + 1 : i + half;
      const float c = cs[2 * i], s = cs[2 * i + 1], x0 = ks[e0], x1 = ks[e1];
      k_codes[e0] = EncodeScaled(x0 * c - x1 * s, k_scale);
      k_codes[e1] = EncodeScaled(x1 * c + x0 * s, k_scale);
      v_codes[i] = EncodeScaled(vs[i], v_scale);
      v_codes[i + half] = EncodeScaled(vs[i + half], v_scale);
    }
    if (lane == 0) {
      reinterpret_cast<float*>(region + r.k_scales)[vector] = k_scale;
      reinterpret_cast<float*>(region + r.v_scales)[vector] = v_scale;
    }
  }
}

__global__ void RopeAppendKernel(RopeAppendArgs a) {
  // The decode attention after it (a programmatic dependent) may stage its
  // key positions meanwhile; it waits for this kernel before reading q or K/V.
  pdl::AllowDependents();
  const int t = blockIdx.x;
  const TokenMeta m = a.meta[t];
  const int half = a.head_dim / 2;
  const int qkv_width = (a.heads + 2 * a.kv_heads) * a.head_dim;
  const float* row = a.qkv + static_cast<int64_t>(t) * qkv_width;
  const int pos = min(max(m.rope_pos, 0), a.max_pos - 1);
  const float* cs = a.rope + static_cast<int64_t>(pos) * half * 2;
  const bool sparse = (m.flags & kTokenSparse) && a.write_slots != nullptr;
  const int64_t layer_stride = static_cast<int64_t>(a.kv_heads) * m.capacity * a.head_dim;
  bf16* k_layer = a.kv_pool + m.kv_offset + a.layer * layer_stride;
  bf16* v_layer = k_layer + static_cast<int64_t>(a.num_layers) * layer_stride;
  // Query pairs.
  for (int p = threadIdx.x; p < a.heads * half; p += blockDim.x) {
    const int h = p / half, i = p % half;
    const float* src = row + h * a.head_dim;
    const int e0 = a.interleaved ? 2 * i : i, e1 = a.interleaved ? 2 * i + 1 : i + half;
    const float c = cs[2 * i], s = cs[2 * i + 1];
    const float x0 = src[e0], x1 = src[e1];
    float* dst = a.q_out + (static_cast<int64_t>(t) * a.heads + h) * a.head_dim;
    dst[e0] = x0 * c - x1 * s;
    dst[e1] = x1 * c + x0 * s;
  }
  if (m.flags & kTokenKvFp8) {
    RopeAppendFp8(a, m, row, cs, sparse, t);
    return;
  }
  // Key pairs and values.
  for (int p = threadIdx.x; p < a.kv_heads * half; p += blockDim.x) {
    const int h = p / half, i = p % half;
    const int kv_index = sparse ? m.decode_base + a.write_slots[static_cast<int64_t>(t) * a.kv_heads + h] : m.kv_index;
    if (kv_index < 0 || kv_index >= m.capacity) continue;
    const float* ks = row + (a.heads + h) * a.head_dim;
    const float* vs = row + (a.heads + a.kv_heads + h) * a.head_dim;
    const int e0 = a.interleaved ? 2 * i : i, e1 = a.interleaved ? 2 * i + 1 : i + half;
    const float c = cs[2 * i], s = cs[2 * i + 1];
    const float x0 = ks[e0], x1 = ks[e1];
    const int64_t base = (static_cast<int64_t>(h) * m.capacity + kv_index) * a.head_dim;
    k_layer[base + e0] = __float2bfloat16(x0 * c - x1 * s);
    k_layer[base + e1] = __float2bfloat16(x1 * c + x0 * s);
    v_layer[base + i] = __float2bfloat16(vs[i]);
    v_layer[base + i + half] = __float2bfloat16(vs[i + half]);
  }
}

}  // namespace

cudaError_t EmbeddingGatherF32(const bf16* table, int64_t vocab, int dim, const int32_t* ids, int rows, float* out,
                               cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  EmbeddingGatherKernel<float><<<rows, 256, 0, stream>>>(table, vocab, dim, ids, out);
  return cudaGetLastError();
}

cudaError_t EmbeddingGatherBf16(const bf16* table, int64_t vocab, int dim, const int32_t* ids, int rows, bf16* out,
                                cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  EmbeddingGatherKernel<bf16><<<rows, 256, 0, stream>>>(table, vocab, dim, ids, out);
  return cudaGetLastError();
}

cudaError_t BiasGelu(const float* x, const float* bias, int rows, int n, bf16* out, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(rows) * n;
  if (total <= 0) return cudaSuccess;
  BiasGeluKernel<<<Blocks(total), kThreads, 0, stream>>>(x, bias, total, n, out);
  return cudaGetLastError();
}

cudaError_t AddBias(float* x, const float* bias, int rows, int n, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(rows) * n;
  if (total <= 0) return cudaSuccess;
  AddBiasKernel<<<Blocks(total), kThreads, 0, stream>>>(x, bias, total, n);
  return cudaGetLastError();
}

cudaError_t AddInPlace(float* y, const float* x, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  AddInPlaceKernel<<<Blocks(n), kThreads, 0, stream>>>(y, x, n);
  return cudaGetLastError();
}

cudaError_t RmsNorm(const float* x, const float* weight, int rows, int dim, float eps, bf16* out, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  RmsNormKernel<<<rows, 256, 0, stream>>>(x, weight, dim, eps, out);
  return cudaGetLastError();
}

cudaError_t LayerNorm(const float* x, const float* weight, const float* bias, int rows, int dim, float eps, bf16* out,
                      cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  LayerNormKernel<<<rows, 256, 0, stream>>>(x, weight, bias, dim, eps, out);
  return cudaGetLastError();
}

cudaError_t AddNorm(const float* y, const float* weight, const float* bias, int rows, int dim, float eps, float* x,
                    bf16* x_bf16, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  AddNormKernel<<<rows, 256, 0, stream>>>(y, weight, bias, dim, eps, x, x_bf16);
  return cudaGetLastError();
}

cudaError_t ConvertToBf16(const float* x, int64_t n, bf16* out, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  ConvertToBf16Kernel<<<Blocks(n), kThreads, 0, stream>>>(x, n, out);
  return cudaGetLastError();
}

cudaError_t HeadLayerNorm(const HeadLayerNormArgs& args, cudaStream_t stream) {
  const int64_t warps = static_cast<int64_t>(args.tokens) * (args.heads + args.kv_heads);
  if (warps <= 0) return cudaSuccess;
  if (args.head_dim <= 0 || args.q_weight == nullptr || args.q_bias == nullptr || args.k_weight == nullptr ||
      args.k_bias == nullptr) {
    return cudaErrorInvalidValue;
  }
  HeadLayerNormKernel<<<Blocks(warps * 32), kThreads, 0, stream>>>(args);
  return cudaGetLastError();
}

cudaError_t SwiGlu(const float* gate_up, int rows, int inter, bf16* out, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(rows) * inter;
  if (total <= 0) return cudaSuccess;
  SwiGluKernel<<<Blocks(total), kThreads, 0, stream>>>(gate_up, inter, total, out);
  return cudaGetLastError();
}

cudaError_t GatherRowsF32(const float* src, const int32_t* rows, int n, int dim, float* dst, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  GatherRowsKernel<<<n, 256, 0, stream>>>(src, rows, dim, dst);
  return cudaGetLastError();
}

cudaError_t RopeAppend(const RopeAppendArgs& args, cudaStream_t stream) {
  if (args.tokens <= 0) return cudaSuccess;
  if (args.head_dim % 2 != 0 || args.max_pos <= 0) return cudaErrorInvalidValue;
  RopeAppendKernel<<<args.tokens, 128, 0, stream>>>(args);
  return cudaGetLastError();
}

}  // namespace argen::kernels
