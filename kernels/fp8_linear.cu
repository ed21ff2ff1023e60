#include <cuda_fp8.h>

#include "kernels/fp8_linear.h"
#include "kernels/kv_fp8.h"

namespace argen::kernels {
namespace {

constexpr int kThreads = 256;

__device__ float BlockMax(float v, float* shared) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) shared[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kThreads / 32 ? shared[lane] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (lane == 0) shared[0] = v;
  }
  __syncthreads();
  return shared[0];
}

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
  amax = BlockMax(amax, shared);
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
