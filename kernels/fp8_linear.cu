#include <cuda_fp8.h>

#include "kernels/common.cuh"
#include "kernels/fp8_linear.h"
#include "kernels/kv_fp8.h"

namespace argen::kernels {
namespace {

constexpr int kThreads = 256;

__global__ void QuantizeRowsKernel(const __nv_bfloat16* __restrict__ x, int32_t cols, uint8_t* __restrict__ codes,
                                   float* __restrict__ scales) {
  __shared__ float shared[kThreads / 32];
  const int64_t row = blockIdx.x;
  const uint4* in = reinterpret_cast<const uint4*>(x + row * cols);  // 8 bf16 a load
  const int32_t vecs = cols / 8;
  float amax = 0.0f;
  for (int32_t i = threadIdx.x; i < vecs; i += kThreads) {
    const uint4 u = in[i];
    const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 f = __bfloat1622float2(p[j]);
      amax = fmaxf(amax, fmaxf(fabsf(f.x), fabsf(f.y)));
    }
  }
  // The row maximum is exact in any reduction order, so the shared block max gives the same scale.
  amax = detail::BlockMax(amax, shared);
  const float scale = E4m3Scale(amax);
  if (threadIdx.x == 0) scales[row] = scale;
  uint2* out = reinterpret_cast<uint2*>(codes + row * cols);  // 8 codes a store
  for (int32_t i = threadIdx.x; i < vecs; i += kThreads) {
    const uint4 u = in[i];
    const __nv_bfloat162* p = reinterpret_cast<const __nv_bfloat162*>(&u);
    uint8_t c[8];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 f = __bfloat1622float2(p[j]);
      // x / scale as on the host (IEEE division); the hardware conversion
      // rounds to nearest even and saturates like EncodeE4m3 (kv_fp8_conversion_test).
      c[2 * j] = scale > 0.0f ? __nv_cvt_float_to_fp8(f.x / scale, __NV_SATFINITE, __NV_E4M3) : 0;
      c[2 * j + 1] = scale > 0.0f ? __nv_cvt_float_to_fp8(f.y / scale, __NV_SATFINITE, __NV_E4M3) : 0;
    }
    uint2 v;
    memcpy(&v, c, 8);
    out[i] = v;
  }
}

}  // namespace

cudaError_t QuantizeRowsE4m3(const __nv_bfloat16* x, int64_t rows, int32_t cols, uint8_t* codes, float* scales,
                             cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (cols % 8 != 0 || rows > 0x7fffffff) return cudaErrorInvalidValue;
  QuantizeRowsKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, cols, codes, scales);
  return cudaGetLastError();
}

}  // namespace argen::kernels
