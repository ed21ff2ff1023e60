#include "kernels/fill_kernels.h"

namespace argen::kernels {
namespace {

__device__ __forceinline__ uint64_t Mix(uint64_t x) {  // splitmix64 finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

__global__ void FillF32Kernel(float* p, int64_t n, float v) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    p[i] = v;
}

__global__ void FillRandomKernel(__nv_bfloat16* p, int64_t n, uint64_t key, float a) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const uint64_t r = Mix(key ^ Mix(static_cast<uint64_t>(i)));
    const float u = static_cast<float>(r >> 40) * (1.0f / 16777216.0f);  // [0, 1)
    p[i] = __float2bfloat16((2.f * u - 1.f) * a);
  }
}

}  // namespace

cudaError_t FillF32(float* p, int64_t n, float value) {
  if (n <= 0) return cudaSuccess;
  FillF32Kernel<<<1024, 256>>>(p, n, value);
  return cudaGetLastError();
}

cudaError_t FillRandomBf16(__nv_bfloat16* p, int64_t n, uint64_t seed, uint64_t stream, float s) {
  if (n <= 0) return cudaSuccess;
  FillRandomKernel<<<4096, 256>>>(p, n, seed * 0x9E3779B97F4A7C15ULL + stream, s * 1.7320508f);
  return cudaGetLastError();
}

}  // namespace argen::kernels
