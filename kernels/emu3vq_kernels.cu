// Emu3 vision decoder kernels: BatchNorm affine + swish, swish, SpatialNorm
// modulation. Layout and semantics: kernels/emu3vq_kernels.h.
#include "kernels/emu3vq_kernels.h"

namespace argen::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t{1} << 20;

int Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

__device__ __forceinline__ int64_t GlobalIndex() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t GlobalStride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// As the CPU decoder's Swish: x / (1 + exp(-x)) in float.
__device__ __forceinline__ float Swish(float x) { return x / (1.0f + expf(-x)); }

// grid.y = channel.
__global__ void ChannelAffineSwishKernel(const float* in, const float* __restrict__ scale,
                                         const float* __restrict__ shift, int64_t n, float* out) {
  const int64_t c = blockIdx.y;
  const float a = scale[c], b = shift[c];
  const float* src = in + c * n;
  float* dst = out + c * n;
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) dst[i] = Swish(src[i] * a + b);
}

__global__ void SwishKernel(float* x, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) x[i] = Swish(x[i]);
}

// grid.y = channel; each thread owns pixels of the channel's plane over all images.
__global__ void SpatialModulateKernel(float* x, const float* __restrict__ scale, const float* __restrict__ shift,
                                      int32_t images, int32_t h, int32_t w, int32_t zh, int32_t zw, bool swish) {
  const int64_t c = blockIdx.y;
  const int64_t hw = static_cast<int64_t>(h) * w, zhw = static_cast<int64_t>(zh) * zw;
  float* plane = x + c * images * hw;
  const float* ys = scale + c * images * zhw;
  const float* bs = shift + c * images * zhw;
  for (int64_t i = GlobalIndex(); i < images * hw; i += GlobalStride()) {
    const int64_t n = i / hw, p = i - n * hw;
    const int64_t y = p / w, xx = p - y * w;
    const int64_t z = n * zhw + (y * zh / h) * zw + xx * zw / w;
    const float v = plane[i] * ys[z] + bs[z];
    plane[i] = swish ? Swish(v) : v;
  }
}

}  // namespace

cudaError_t Emu3ChannelAffineSwish(const float* in, const float* scale, const float* shift, int32_t channels, int64_t n,
                                   float* out, cudaStream_t stream) {
  if (channels <= 0 || n <= 0) return cudaSuccess;
  ChannelAffineSwishKernel<<<dim3(Blocks(n), channels), kThreads, 0, stream>>>(in, scale, shift, n, out);
  return cudaGetLastError();
}

cudaError_t Emu3SwishInPlace(float* x, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  SwishKernel<<<Blocks(n), kThreads, 0, stream>>>(x, n);
  return cudaGetLastError();
}

cudaError_t Emu3SpatialModulate(float* x, const float* scale, const float* shift, int32_t channels, int32_t images,
                                int32_t h, int32_t w, int32_t zh, int32_t zw, bool swish, cudaStream_t stream) {
  const int64_t n = static_cast<int64_t>(images) * h * w;
  if (channels <= 0 || n <= 0) return cudaSuccess;
  SpatialModulateKernel<<<dim3(Blocks(n), channels), kThreads, 0, stream>>>(x, scale, shift, images, h, w, zh, zw,
                                                                            swish);
  return cudaGetLastError();
}

}  // namespace argen::kernels
