// T5 encoder kernels: RMS norm, bias + softmax, gated GELU. Semantics: kernels/t5_kernels.h.
#include <algorithm>
#include <cmath>

#include "kernels/t5_kernels.h"

namespace argen::kernels {
namespace {

constexpr int kThreads = 256;  // a multiple of 32; the block reductions assume it

// Block-wide float reduction (sum or max); every thread gets the result. scratch: 32 floats.
template <bool kMax>
__device__ float BlockReduce(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
#pragma unroll
  for (int off = 16; off > 0; off /= 2) {
    const float o = __shfl_xor_sync(0xffffffffu, v, off);
    v = kMax ? fmaxf(v, o) : v + o;
  }
  __syncthreads();  // scratch may still be read from a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : (kMax ? -INFINITY : 0.0f);
  if (warp == 0) {
#pragma unroll
    for (int off = 16; off > 0; off /= 2) {
      const float o = __shfl_xor_sync(0xffffffffu, v, off);
      v = kMax ? fmaxf(v, o) : v + o;
    }
    if (lane == 0) scratch[0] = v;
  }
  __syncthreads();
  return scratch[0];
}

__global__ void RmsNormKernel(const float* x, const float* __restrict__ weight, int32_t dim, float eps, float* out) {
  __shared__ float scratch[32];
  const float* xr = x + static_cast<int64_t>(blockIdx.x) * dim;
  float* yr = out + static_cast<int64_t>(blockIdx.x) * dim;
  float sum = 0.0f;
  for (int32_t i = threadIdx.x; i < dim; i += blockDim.x) sum += xr[i] * xr[i];
  sum = BlockReduce<false>(sum, scratch);
  const float scale = 1.0f / sqrtf(sum / static_cast<float>(dim) + eps);
  for (int32_t i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = weight[i] * (xr[i] * scale);
}

// blockIdx.x = h * n + i.
__global__ void BiasSoftmaxKernel(float* scores, const float* __restrict__ rel_bias,
                                  const int32_t* __restrict__ buckets, int32_t max_len, int32_t heads, int32_t n) {
  __shared__ float scratch[32];
  const int32_t h = static_cast<int32_t>(blockIdx.x / n), i = static_cast<int32_t>(blockIdx.x % n);
  float* row = scores + static_cast<int64_t>(blockIdx.x) * n;
  float top = -INFINITY;
  for (int32_t j = threadIdx.x; j < n; j += blockDim.x) {
    const int32_t bucket = buckets[j - i + max_len - 1];
    const float v = row[j] + rel_bias[bucket * heads + h];
    row[j] = v;
    top = fmaxf(top, v);
  }
  top = BlockReduce<true>(top, scratch);
  float sum = 0.0f;
  for (int32_t j = threadIdx.x; j < n; j += blockDim.x) {
    const float e = expf(row[j] - top);
    row[j] = e;
    sum += e;
  }
  sum = BlockReduce<false>(sum, scratch);
  for (int32_t j = threadIdx.x; j < n; j += blockDim.x) row[j] /= sum;
}

__global__ void GatedGeluKernel(const float* __restrict__ gate_up, int64_t rows, int32_t ff, float* __restrict__ out) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  const int64_t total = rows * ff;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t r = idx / ff, f = idx - r * ff;
    const float g = gate_up[r * 2 * ff + f];
    const float u = gate_up[r * 2 * ff + ff + f];
    out[idx] = 0.5f * g * (1.0f + tanhf(kSqrt2OverPi * (g + 0.044715f * g * g * g))) * u;
  }
}

}  // namespace

cudaError_t T5RmsNorm(const float* x, const float* weight, int32_t rows, int32_t dim, float eps, float* out,
                      cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  RmsNormKernel<<<rows, kThreads, 0, stream>>>(x, weight, dim, eps, out);
  return cudaGetLastError();
}

cudaError_t T5BiasSoftmax(float* scores, const float* rel_bias, const int32_t* buckets, int32_t max_len, int32_t heads,
                          int32_t n, cudaStream_t stream) {
  if (heads <= 0 || n <= 0) return cudaSuccess;
  if (n > max_len) return cudaErrorInvalidValue;
  BiasSoftmaxKernel<<<heads * n, kThreads, 0, stream>>>(scores, rel_bias, buckets, max_len, heads, n);
  return cudaGetLastError();
}

cudaError_t T5GatedGelu(const float* gate_up, int32_t rows, int32_t ff, float* out, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(rows) * ff;
  if (total <= 0) return cudaSuccess;
  const int64_t blocks = std::min<int64_t>((total + kThreads - 1) / kThreads, int64_t{1} << 16);
  GatedGeluKernel<<<static_cast<int>(blocks), kThreads, 0, stream>>>(gate_up, rows, ff, out);
  return cudaGetLastError();
}

}  // namespace argen::kernels
