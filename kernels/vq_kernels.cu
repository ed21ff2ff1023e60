// VQ-16 decoder kernels: im2col 3x3, bias rows, residual add, GroupNorm(+swish),
// nearest 2x upsample, codebook lookup, softmax rows, float -> RGB8.
// Layout and semantics: kernels/vq_kernels.h.
#include <cmath>

#include "kernels/vq_kernels.h"

namespace argen::kernels {
namespace {

constexpr int kThreads = 256;
// Grid-stride kernels never need more blocks than this to fill the GPU.
constexpr int64_t kMaxBlocks = int64_t{1} << 20;

int Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

__device__ __forceinline__ int64_t GlobalIndex() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t GlobalStride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

// grid.y = input channel; each thread owns columns j and writes that channel's 9 rows.
__global__ void Im2Col3x3Kernel(const float* __restrict__ in, int32_t images, int32_t h, int32_t w, int64_t col0,
                                int64_t cols, float* __restrict__ col) {
  const int64_t c = blockIdx.y;
  const int64_t hw = static_cast<int64_t>(h) * w;
  const float* plane = in + c * images * hw;
  float* dst = col + c * 9 * cols;
  for (int64_t j = GlobalIndex(); j < cols; j += GlobalStride()) {
    const int64_t p = col0 + j;
    const int64_t n = p / hw;
    const int64_t q = p - n * hw;
    const int32_t y = static_cast<int32_t>(q / w), x = static_cast<int32_t>(q % w);
    const float* img = plane + n * hw;
#pragma unroll
    for (int ky = 0; ky < 3; ++ky) {
      const int32_t sy = y + ky - 1;
      const bool row_ok = sy >= 0 && sy < h;
#pragma unroll
      for (int kx = 0; kx < 3; ++kx) {
        const int32_t sx = x + kx - 1;
        const bool ok = row_ok && sx >= 0 && sx < w;
        dst[(ky * 3 + kx) * cols + j] = ok ? img[static_cast<int64_t>(sy) * w + sx] : 0.0f;
      }
    }
  }
}

__global__ void BiasRowsKernel(float* out, const float* __restrict__ bias, int64_t n, bool accumulate) {
  float* row = out + static_cast<int64_t>(blockIdx.y) * n;
  const float b = bias[blockIdx.y];
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) row[i] = accumulate ? row[i] + b : b;
}

__global__ void AddInPlaceKernel(float* y, const float* __restrict__ x, int64_t n) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) y[i] += x[i];
}

// Block-wide double sum; every thread gets the result. scratch: 32 doubles.
__device__ double BlockSumDouble(double v, double* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  __syncthreads();  // scratch may still be read from a previous call
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  double total = 0.0;
  for (int i = 0; i < warps; ++i) total += scratch[i];
  return total;
}

constexpr int kNormThreads = 512;

// blockIdx.x = image * groups + group.
__global__ void __launch_bounds__(kNormThreads)
    GroupNormKernel(const float* in, const float* __restrict__ gamma, const float* __restrict__ beta, int32_t channels,
                    int32_t groups, int32_t images, int64_t hw, float eps, bool swish, float* out) {
  __shared__ double scratch[32];
  const int32_t n = blockIdx.x / groups, g = blockIdx.x % groups;
  const int32_t per_group = channels / groups;
  const int64_t stride = static_cast<int64_t>(images) * hw;  // one channel row
  const int64_t count = static_cast<int64_t>(per_group) * hw;
  const int64_t base = static_cast<int64_t>(g) * per_group * stride + static_cast<int64_t>(n) * hw;
  // Element e of the group: channel e / hw of the group, pixel e % hw.
  double sum = 0.0;
  for (int32_t cc = 0; cc < per_group; ++cc) {
    const float* x = in + base + cc * stride;
    for (int64_t i = threadIdx.x; i < hw; i += blockDim.x) sum += x[i];
  }
  const double mean = BlockSumDouble(sum, scratch) / static_cast<double>(count);
  double sq = 0.0;
  for (int32_t cc = 0; cc < per_group; ++cc) {
    const float* x = in + base + cc * stride;
    for (int64_t i = threadIdx.x; i < hw; i += blockDim.x) {
      const double d = x[i] - mean;
      sq += d * d;
    }
  }
  sq = BlockSumDouble(sq, scratch);
  const double inv_std = 1.0 / sqrt(sq / static_cast<double>(count) + static_cast<double>(eps));
  for (int32_t cc = 0; cc < per_group; ++cc) {
    const int32_t c = g * per_group + cc;
    const float scale = static_cast<float>(gamma[c] * inv_std);
    const float shift = static_cast<float>(beta[c] - mean * gamma[c] * inv_std);
    const float* x = in + base + cc * stride;
    float* y = out + base + cc * stride;
    for (int64_t i = threadIdx.x; i < hw; i += blockDim.x) {
      // Separate rounding of the product and the sum, as the CPU (no FMA) does.
      const float v = __fadd_rn(__fmul_rn(x[i], scale), shift);
      y[i] = swish ? v / (1.0f + expf(-v)) : v;
    }
  }
}

__global__ void UpsampleNearest2xKernel(const float* __restrict__ in, int32_t images, int32_t h, int32_t w,
                                        int64_t total, float* __restrict__ out) {
  const int64_t hw = static_cast<int64_t>(h) * w;
  const int64_t out_plane = 4 * hw;            // one image of one channel
  const int64_t out_row = out_plane * images;  // one channel
  const int64_t in_row = hw * images;
  const int32_t w2 = 2 * w;
  for (int64_t i = GlobalIndex(); i < total; i += GlobalStride()) {
    const int64_t c = i / out_row;
    const int64_t r = i - c * out_row;
    const int64_t n = r / out_plane;
    const int64_t q = r - n * out_plane;
    const int64_t y2 = q / w2, x2 = q % w2;
    out[i] = in[c * in_row + n * hw + (y2 >> 1) * w + (x2 >> 1)];
  }
}

__global__ void CodebookLookupKernel(const float* __restrict__ codebook, int32_t codebook_size, int32_t dim,
                                     const int32_t* __restrict__ tokens, int64_t n, float* __restrict__ out) {
  for (int64_t i = GlobalIndex(); i < n; i += GlobalStride()) {
    const int32_t id = tokens[i];
    const bool valid = id >= 0 && id < codebook_size;
    const float* row = codebook + (valid ? static_cast<int64_t>(id) * dim : 0);
    for (int32_t c = 0; c < dim; ++c) out[c * n + i] = valid ? row[c] : 0.0f;
  }
}

constexpr int kSoftmaxWarps = 8;

// One warp per row.
__global__ void SoftmaxRowsKernel(float* scores, int64_t rows, int32_t n) {
  const int lane = threadIdx.x & 31;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kSoftmaxWarps + (threadIdx.x >> 5);
  if (r >= rows) return;
  float* row = scores + r * n;
  float mx = -INFINITY;
  for (int32_t j = lane; j < n; j += 32) mx = fmaxf(mx, row[j]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  double sum = 0.0;
  for (int32_t j = lane; j < n; j += 32) {
    const float e = expf(row[j] - mx);
    row[j] = e;
    sum += e;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const float inv = static_cast<float>(1.0 / sum);
  for (int32_t j = lane; j < n; j += 32) row[j] *= inv;
}

__global__ void ToRgb8Kernel(const float* __restrict__ chw, int64_t total_pixels, uint8_t* __restrict__ rgb) {
  // total_pixels = images * hw; channel c of pixel i is chw[c * total_pixels + i]
  // and image n's pixel p is i = n * hw + p, so rgb[3 * i + c] is image n's HWC byte.
  for (int64_t i = GlobalIndex(); i < total_pixels; i += GlobalStride()) {
#pragma unroll
    for (int c = 0; c < 3; ++c) {
      // (x + 1) / 2 * 255 with each operation rounded separately, as in pixels.cc.
      float v = __fmul_rn(__fdiv_rn(__fadd_rn(chw[c * total_pixels + i], 1.0f), 2.0f), 255.0f);
      if (!(v > 0.0f)) v = 0.0f;  // also NaN
      if (v > 255.0f) v = 255.0f;
      rgb[3 * i + c] = static_cast<uint8_t>(static_cast<uint32_t>(v));  // truncates
    }
  }
}

}  // namespace

cudaError_t VqIm2Col3x3(const float* in, int32_t cin, int32_t images, int32_t h, int32_t w, int64_t col0, int64_t cols,
                        float* col, cudaStream_t stream) {
  if (cols <= 0 || cin <= 0) return cudaSuccess;
  if (cin > 65535) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(Blocks(cols)), static_cast<unsigned>(cin));
  Im2Col3x3Kernel<<<grid, kThreads, 0, stream>>>(in, images, h, w, col0, cols, col);
  return cudaGetLastError();
}

cudaError_t VqBiasRows(float* out, const float* bias, int32_t rows, int64_t n, bool accumulate, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  if (rows > 65535) return cudaErrorInvalidValue;
  const int64_t per_row = (n + kThreads - 1) / kThreads;
  const dim3 grid(static_cast<unsigned>(per_row > 4096 ? 4096 : per_row), static_cast<unsigned>(rows));
  BiasRowsKernel<<<grid, kThreads, 0, stream>>>(out, bias, n, accumulate);
  return cudaGetLastError();
}

cudaError_t VqAddInPlace(float* y, const float* x, int64_t n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  AddInPlaceKernel<<<Blocks(n), kThreads, 0, stream>>>(y, x, n);
  return cudaGetLastError();
}

cudaError_t VqGroupNorm(const float* in, const float* gamma, const float* beta, int32_t channels, int32_t groups,
                        int32_t images, int64_t hw, float eps, bool swish, float* out, cudaStream_t stream) {
  if (images <= 0 || hw <= 0) return cudaSuccess;
  if (groups <= 0 || channels % groups != 0) return cudaErrorInvalidValue;
  GroupNormKernel<<<images * groups, kNormThreads, 0, stream>>>(in, gamma, beta, channels, groups, images, hw, eps,
                                                                swish, out);
  return cudaGetLastError();
}

cudaError_t VqUpsampleNearest2x(const float* in, int32_t c, int32_t images, int32_t h, int32_t w, float* out,
                                cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(c) * images * 4 * h * w;
  if (total <= 0) return cudaSuccess;
  UpsampleNearest2xKernel<<<Blocks(total), kThreads, 0, stream>>>(in, images, h, w, total, out);
  return cudaGetLastError();
}

cudaError_t VqCodebookLookup(const float* codebook, int32_t codebook_size, int32_t dim, const int32_t* tokens,
                             int64_t n, float* out, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  CodebookLookupKernel<<<Blocks(n), kThreads, 0, stream>>>(codebook, codebook_size, dim, tokens, n, out);
  return cudaGetLastError();
}

cudaError_t VqSoftmaxRows(float* scores, int64_t rows, int32_t n, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  const int64_t blocks = (rows + kSoftmaxWarps - 1) / kSoftmaxWarps;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  SoftmaxRowsKernel<<<static_cast<unsigned>(blocks), kSoftmaxWarps * 32, 0, stream>>>(scores, rows, n);
  return cudaGetLastError();
}

cudaError_t VqToRgb8(const float* chw, int32_t images, int64_t hw, uint8_t* rgb, cudaStream_t stream) {
  const int64_t total = static_cast<int64_t>(images) * hw;
  if (total <= 0) return cudaSuccess;
  ToRgb8Kernel<<<Blocks(total), kThreads, 0, stream>>>(chw, total, rgb);
  return cudaGetLastError();
}

}  // namespace argen::kernels
