// The VQ-16 decoder's bf16 NHWC kernels: codebook lookup, GroupNorm(+swish)
// with an input bias, nearest 2x upsample with an input bias, row bias add,
// softmax to bf16, and conv_out in fp32; and Emu3's additions (affine +
// swish of the temporal stack, SpatialNorm's modulation). Semantics: kernels/vq_nhwc_kernels.h.
#include <cmath>
#include <cstdint>

#include "kernels/common.cuh"
#include "kernels/vq_nhwc_kernels.h"

namespace argen::kernels {
namespace {

using bf16 = __nv_bfloat16;
using detail::Bf16x8;
using detail::Load8;
using detail::Pack8;
using detail::Unpack8;

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = int64_t{1} << 20;
constexpr int kGnThreads = 256;
constexpr int kSoftmaxWarps = 8;
constexpr int kConvOutThreads = 256;
constexpr int kConvOutPixelsPerLane = 4;  // pixels a lane accumulates per weight load
static_assert(kVqGnMaxChannels == 8 * kGnThreads, "one 8-channel vector per statistics thread");
static_assert(27 * kVqConvOutMaxChannels * sizeof(float) <= 48 * 1024, "conv_out filter in static-limit shared memory");

int Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<int>(b < 1 ? 1 : (b > kMaxBlocks ? kMaxBlocks : b));
}

// Blocks along x for a per-image loop over `per_image` items with grid.y = images.
unsigned PerImageBlocks(int64_t per_image, int32_t images) {
  int64_t b = (per_image + kThreads - 1) / kThreads;
  const int64_t cap = images >= 4096 ? 1 : 4096 / images;
  if (b > cap) b = cap;
  return static_cast<unsigned>(b < 1 ? 1 : b);
}

bool Aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

__device__ __forceinline__ int64_t GlobalIndex() { return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; }
__device__ __forceinline__ int64_t GlobalStride() { return static_cast<int64_t>(gridDim.x) * blockDim.x; }

__device__ __forceinline__ void Store8(bf16* p, const float v[8]) { *reinterpret_cast<Bf16x8*>(p) = Pack8(v); }

__global__ void LookupKernel(const uint4* __restrict__ table, int32_t rows, int32_t vecs,
                             const int32_t* __restrict__ tokens, int64_t total, uint4* __restrict__ out) {
  for (int64_t i = GlobalIndex(); i < total; i += GlobalStride()) {
    const int64_t cell = i / vecs;
    const int32_t v = static_cast<int32_t>(i - cell * vecs);
    const int32_t id = tokens[cell];
    out[i] = (id >= 0 && id < rows) ? table[static_cast<int64_t>(id) * vecs + v] : make_uint4(0, 0, 0, 0);
  }
}

// grid (chunks, images). Thread t owns channels [8*(t % slots), +8) of every
// (kGnThreads / slots)-th pixel of the chunk; per-channel sums meet in shared memory.
__global__ void __launch_bounds__(kGnThreads)
    GnStatsKernel(const bf16* __restrict__ x, const float* __restrict__ in_bias, int64_t hw, int32_t channels,
                  int32_t chunks, double2* __restrict__ partial) {
  __shared__ double s_sum[kGnThreads * 8];
  __shared__ double s_sq[kGnThreads * 8];
  const int32_t slots = channels >> 3;
  const int32_t rows = kGnThreads / slots;
  const int32_t t = threadIdx.x;
  const int32_t slot = t % slots, row = t / slots;
  const int32_t n = blockIdx.y, chunk = blockIdx.x;
  if (row < rows) {
    float bias[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) bias[j] = in_bias ? in_bias[slot * 8 + j] : 0.0f;
    double sum[8], sq[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) sum[j] = sq[j] = 0.0;
    const int64_t p0 = static_cast<int64_t>(chunk) * kVqGnChunkPixels;
    const int64_t p1 = min(hw, p0 + kVqGnChunkPixels);
    const bf16* base = x + static_cast<int64_t>(n) * hw * channels + slot * 8;
    for (int64_t p = p0 + row; p < p1; p += rows) {
      float v[8];
      Unpack8(Load8(base + p * channels), v);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const double d = static_cast<double>(v[j]) + static_cast<double>(bias[j]);
        sum[j] += d;
        sq[j] = fma(d, d, sq[j]);
      }
    }
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      s_sum[row * channels + slot * 8 + j] = sum[j];
      s_sq[row * channels + slot * 8 + j] = sq[j];
    }
  }
  __syncthreads();
  for (int32_t c = t; c < channels; c += kGnThreads) {
    double a = 0.0, b = 0.0;
    for (int32_t r = 0; r < rows; ++r) {
      a += s_sum[r * channels + c];
      b += s_sq[r * channels + c];
    }
    partial[(static_cast<int64_t>(n) * chunks + chunk) * channels + c] = make_double2(a, b);
  }
}

// grid (groups, images).
__global__ void __launch_bounds__(kGnThreads)
    GnFinalizeKernel(const double2* __restrict__ partial, const float* __restrict__ in_bias,
                     const float* __restrict__ gamma, const float* __restrict__ beta, int64_t hw, int32_t channels,
                     int32_t groups, int32_t chunks, float eps, float2* __restrict__ scale_shift) {
  __shared__ double s_a[kGnThreads / 32], s_b[kGnThreads / 32];
  __shared__ double s_mean, s_inv;
  const int32_t g = blockIdx.x, n = blockIdx.y;
  const int32_t cpg = channels / groups;
  const int64_t items = static_cast<int64_t>(chunks) * cpg;
  double a = 0.0, b = 0.0;
  for (int64_t i = threadIdx.x; i < items; i += blockDim.x) {
    const int64_t ch = i / cpg;
    const int32_t cc = static_cast<int32_t>(i - ch * cpg);
    const double2 v = partial[(static_cast<int64_t>(n) * chunks + ch) * channels + g * cpg + cc];
    a += v.x;
    b += v.y;
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    a += __shfl_xor_sync(0xffffffffu, a, o);
    b += __shfl_xor_sync(0xffffffffu, b, o);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) {
    s_a[warp] = a;
    s_b[warp] = b;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    double sa = 0.0, sb = 0.0;
    for (int i = 0; i < kGnThreads / 32; ++i) {
      sa += s_a[i];
      sb += s_b[i];
    }
    const double count = static_cast<double>(cpg) * static_cast<double>(hw);
    const double mean = sa / count;
    const double var = fmax(0.0, sb / count - mean * mean);
    s_mean = mean;
    s_inv = 1.0 / sqrt(var + static_cast<double>(eps));
  }
  __syncthreads();
  for (int32_t cc = threadIdx.x; cc < cpg; cc += blockDim.x) {
    const int32_t c = g * cpg + cc;
    const double scale = static_cast<double>(gamma[c]) * s_inv;
    const double pb = in_bias ? static_cast<double>(in_bias[c]) : 0.0;
    scale_shift[static_cast<int64_t>(n) * channels + c] = make_float2(
        static_cast<float>(scale), static_cast<float>(static_cast<double>(beta[c]) + (pb - s_mean) * scale));
  }
}

// grid (x, images); x may equal y (each thread reads its vector before writing it).
__global__ void GnApplyKernel(const bf16* x, const float2* __restrict__ scale_shift, int32_t per_image_vecs,
                              int32_t slots, bool swish, bf16* y) {
  const int32_t n = blockIdx.y;
  const float4* ss = reinterpret_cast<const float4*>(scale_shift + static_cast<int64_t>(n) * slots * 8);
  const int64_t base = static_cast<int64_t>(n) * per_image_vecs;
  for (int32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < per_image_vecs; i += gridDim.x * blockDim.x) {
    const int32_t slot = i % slots;
    float v[8];
    Unpack8(Load8(x + (base + i) * 8), v);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const float4 k = __ldg(ss + slot * 4 + q);  // (scale, shift) of channels 2q, 2q+1
      v[2 * q] = v[2 * q] * k.x + k.y;
      v[2 * q + 1] = v[2 * q + 1] * k.z + k.w;
    }
    if (swish) {
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = v[j] / (1.0f + __expf(-v[j]));
    }
    Store8(y + (base + i) * 8, v);
  }
}

// grid (x, images): output vectors of one image.
__global__ void Upsample2xKernel(const bf16* __restrict__ in, const float* __restrict__ bias, int32_t h, int32_t w,
                                 int32_t slots, int32_t out_vecs, bf16* __restrict__ out) {
  const int32_t n = blockIdx.y;
  const int32_t w2 = 2 * w;
  const bf16* src = in + static_cast<int64_t>(n) * h * w * slots * 8;
  bf16* dst = out + static_cast<int64_t>(n) * out_vecs * 8;
  for (int32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < out_vecs; i += gridDim.x * blockDim.x) {
    const int32_t slot = i % slots;
    const int32_t pix = i / slots;
    const int32_t yy = pix / w2, xx = pix - yy * w2;
    float v[8];
    Unpack8(Load8(src + (static_cast<int64_t>(yy >> 1) * w + (xx >> 1)) * slots * 8 + slot * 8), v);
    if (bias) {
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] += __ldg(bias + slot * 8 + j);
    }
    Store8(dst + static_cast<int64_t>(i) * 8, v);
  }
}

__global__ void AddBiasKernel(bf16* x, const float* __restrict__ bias, int64_t total_vecs, int32_t slots) {
  for (int64_t i = GlobalIndex(); i < total_vecs; i += GlobalStride()) {
    const int32_t slot = static_cast<int32_t>(i % slots);
    float v[8];
    Unpack8(Load8(x + i * 8), v);
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] += __ldg(bias + slot * 8 + j);
    Store8(x + i * 8, v);
  }
}

__global__ void AffineSwishKernel(const bf16* in, const float* __restrict__ scale, const float* __restrict__ shift,
                                  int64_t total_vecs, int32_t slots, bf16* out) {
  for (int64_t i = GlobalIndex(); i < total_vecs; i += GlobalStride()) {
    const int32_t slot = static_cast<int32_t>(i % slots);
    float v[8];
    Unpack8(Load8(in + i * 8), v);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float y = v[j] * (scale ? __ldg(scale + slot * 8 + j) : 1.0f) + __ldg(shift + slot * 8 + j);
      v[j] = y / (1.0f + __expf(-y));
    }
    Store8(out + i * 8, v);
  }
}

// grid (x, images): the vectors of one image.
__global__ void SpatialModulateKernel(bf16* x, const float* __restrict__ cond, const float* __restrict__ cond_bias,
                                      int32_t h, int32_t w, int32_t zh, int32_t zw, int32_t slots,
                                      int64_t per_image_vecs, bool swish) {
  const int32_t n = blockIdx.y;
  bf16* img = x + static_cast<int64_t>(n) * per_image_vecs * 8;
  const int64_t cond_row = int64_t{2} * slots * 8;  // floats per code cell: scale | shift
  const float* cimg = cond + static_cast<int64_t>(n) * zh * zw * cond_row;
  for (int64_t i = GlobalIndex(); i < per_image_vecs; i += GlobalStride()) {
    const int32_t slot = static_cast<int32_t>(i % slots);
    const int64_t pix = i / slots;
    const int64_t yy = pix / w, xx = pix - yy * w;
    const float* c = cimg + ((yy * zh / h) * zw + xx * zw / w) * cond_row + slot * 8;
    const float* cb = cond_bias + slot * 8;
    float v[8];
    Unpack8(Load8(img + i * 8), v);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float scale = c[j] + __ldg(cb + j);
      const float shift = c[slots * 8 + j] + __ldg(cb + slots * 8 + j);
      float y = v[j] * scale + shift;
      if (swish) y = y / (1.0f + __expf(-y));
      v[j] = y;
    }
    Store8(img + i * 8, v);
  }
}

// One warp per row.
__global__ void SoftmaxToBf16Kernel(const float* __restrict__ scores, int64_t rows, int32_t n,
                                    bf16* __restrict__ probs) {
  const int lane = threadIdx.x & 31;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kSoftmaxWarps + (threadIdx.x >> 5);
  if (r >= rows) return;  // warp-uniform
  const float* row = scores + r * n;
  bf16* out = probs + r * n;
  float mx = -INFINITY;
  for (int32_t j = lane; j < n; j += 32) mx = fmaxf(mx, row[j]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  double sum = 0.0;
  for (int32_t j = lane; j < n; j += 32) sum += expf(row[j] - mx);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const float inv = static_cast<float>(1.0 / sum);
  for (int32_t j = lane; j < n; j += 32) out[j] = __float2bfloat16_rn(expf(row[j] - mx) * inv);
}

// L lanes share a pixel (each a strided subset of its 8-channel vectors),
// 32 / L pixels per warp step, kConvOutPixelsPerLane steps per weight load;
// the filter [9][3][cin] sits in shared memory; partial sums meet by shuffles.
template <int L>
__global__ void __launch_bounds__(kConvOutThreads)
    ConvOut3Kernel(const bf16* __restrict__ in, const float* __restrict__ weight_t, const float* __restrict__ bias,
                   int32_t h, int32_t w, int32_t cin, int64_t total, float* __restrict__ out, int64_t plane_stride) {
  extern __shared__ float4 s_w4[];
  float* s_w = reinterpret_cast<float*>(s_w4);
  const int32_t n_w = 27 * cin;
  for (int32_t i = threadIdx.x; i < n_w; i += blockDim.x) s_w[i] = weight_t[i];
  __syncthreads();
  constexpr int kPw = 32 / L;
  constexpr int kPpl = kConvOutPixelsPerLane;
  const int lane = threadIdx.x & 31;
  const int sub = lane / L, vl = lane % L;
  const int32_t vecs = cin >> 3;
  const int32_t row4 = cin >> 2;  // float4s of one output's filter row
  const int64_t hw = static_cast<int64_t>(h) * w;
  const float b0 = bias[0], b1 = bias[1], b2 = bias[2];
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int64_t warps = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  const int64_t step = static_cast<int64_t>(kPw) * kPpl;
  for (int64_t base = warp * step; base < total; base += warps * step) {  // warp-uniform
    int64_t pimg[kPpl];
    int32_t py[kPpl], px[kPpl];
    bool valid[kPpl];
#pragma unroll
    for (int k = 0; k < kPpl; ++k) {
      const int64_t p = base + k * kPw + sub;
      valid[k] = p < total;
      const int64_t q = valid[k] ? p : 0;
      pimg[k] = q / hw;
      const int32_t rem = static_cast<int32_t>(q - pimg[k] * hw);
      py[k] = rem / w;
      px[k] = rem - py[k] * w;
    }
    float acc[kPpl][3];
#pragma unroll
    for (int k = 0; k < kPpl; ++k) acc[k][0] = acc[k][1] = acc[k][2] = 0.0f;
#pragma unroll
    for (int tap = 0; tap < 9; ++tap) {
      const int dy = tap / 3 - 1, dx = tap % 3 - 1;
      for (int32_t v = vl; v < vecs; v += L) {
        const float4* w4 = reinterpret_cast<const float4*>(s_w + tap * 3 * cin + v * 8);
        float wv[3][8];
#pragma unroll
        for (int o = 0; o < 3; ++o) {
          const float4 lo = w4[o * row4], hi = w4[o * row4 + 1];
          wv[o][0] = lo.x;
          wv[o][1] = lo.y;
          wv[o][2] = lo.z;
          wv[o][3] = lo.w;
          wv[o][4] = hi.x;
          wv[o][5] = hi.y;
          wv[o][6] = hi.z;
          wv[o][7] = hi.w;
        }
#pragma unroll
        for (int k = 0; k < kPpl; ++k) {
          const int32_t sy = py[k] + dy, sx = px[k] + dx;
          if (valid[k] && sy >= 0 && sy < h && sx >= 0 && sx < w) {
            float xv[8];
            Unpack8(Load8(in + ((pimg[k] * h + sy) * w + sx) * cin + v * 8), xv);
#pragma unroll
            for (int o = 0; o < 3; ++o)
#pragma unroll
              for (int j = 0; j < 8; ++j) acc[k][o] = fmaf(xv[j], wv[o][j], acc[k][o]);
          }
        }
      }
    }
#pragma unroll
    for (int k = 0; k < kPpl; ++k)
#pragma unroll
      for (int o = 0; o < 3; ++o)
#pragma unroll
        for (int off = L / 2; off > 0; off >>= 1) acc[k][o] += __shfl_xor_sync(0xffffffffu, acc[k][o], off);
    if (vl == 0) {
#pragma unroll
      for (int k = 0; k < kPpl; ++k) {
        if (!valid[k]) continue;
        const int64_t p = base + k * kPw + sub;
        out[p] = acc[k][0] + b0;
        out[plane_stride + p] = acc[k][1] + b1;
        out[2 * plane_stride + p] = acc[k][2] + b2;
      }
    }
  }
}

template <int L>
cudaError_t LaunchConvOut(const bf16* in, const float* weight_t, const float* bias, int32_t h, int32_t w, int32_t cin,
                          int64_t total, float* out, int64_t plane_stride, cudaStream_t stream) {
  const int64_t per_block = static_cast<int64_t>(kConvOutThreads / 32) * (32 / L) * kConvOutPixelsPerLane;
  int64_t blocks = (total + per_block - 1) / per_block;
  if (blocks > 2048) blocks = 2048;
  const size_t smem = sizeof(float) * 27 * static_cast<size_t>(cin);
  ConvOut3Kernel<L><<<static_cast<unsigned>(blocks), kConvOutThreads, smem, stream>>>(in, weight_t, bias, h, w, cin,
                                                                                      total, out, plane_stride);
  return cudaGetLastError();
}

}  // namespace

int64_t VqGroupNormChunks(int64_t hw) { return (hw + kVqGnChunkPixels - 1) / kVqGnChunkPixels; }

int64_t VqGroupNormPartialBytes(int32_t images, int64_t hw, int32_t channels) {
  return static_cast<int64_t>(sizeof(double2)) * images * VqGroupNormChunks(hw) * channels;
}

cudaError_t VqNhwcLookup(const bf16* table, int32_t rows, int32_t dim, const int32_t* tokens, int64_t count, bf16* out,
                         cudaStream_t stream) {
  if (count <= 0) return cudaSuccess;
  if (dim <= 0 || dim % 8 != 0 || !Aligned16(table) || !Aligned16(out)) return cudaErrorInvalidValue;
  const int32_t vecs = dim / 8;
  const int64_t total = count * vecs;
  LookupKernel<<<Blocks(total), kThreads, 0, stream>>>(reinterpret_cast<const uint4*>(table), rows, vecs, tokens, total,
                                                       reinterpret_cast<uint4*>(out));
  return cudaGetLastError();
}

cudaError_t VqNhwcGroupNorm(const bf16* in, const float* in_bias, const float* gamma, const float* beta, int32_t images,
                            int64_t hw, int32_t channels, int32_t groups, float eps, bool swish, double2* partial,
                            float2* scale_shift, bf16* out, cudaStream_t stream) {
  if (images <= 0 || hw <= 0) return cudaSuccess;
  if (channels <= 0 || channels % 8 != 0 || channels > kVqGnMaxChannels || groups <= 0 || channels % groups != 0 ||
      images > 65535 || !Aligned16(in) || !Aligned16(out) || !Aligned16(scale_shift)) {
    return cudaErrorInvalidValue;
  }
  const int64_t chunks = VqGroupNormChunks(hw);
  const int64_t per_image_vecs = hw * (channels / 8);
  if (chunks > 0x7fffffff || per_image_vecs > 0x7fffffff) return cudaErrorInvalidValue;
  GnStatsKernel<<<dim3(static_cast<unsigned>(chunks), static_cast<unsigned>(images)), kGnThreads, 0, stream>>>(
      in, in_bias, hw, channels, static_cast<int32_t>(chunks), partial);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  GnFinalizeKernel<<<dim3(static_cast<unsigned>(groups), static_cast<unsigned>(images)), kGnThreads, 0, stream>>>(
      partial, in_bias, gamma, beta, hw, channels, groups, static_cast<int32_t>(chunks), eps, scale_shift);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) return e;
  const dim3 grid(PerImageBlocks(per_image_vecs, images), static_cast<unsigned>(images));
  GnApplyKernel<<<grid, kThreads, 0, stream>>>(in, scale_shift, static_cast<int32_t>(per_image_vecs), channels / 8,
                                               swish, out);
  return cudaGetLastError();
}

cudaError_t VqNhwcUpsample2x(const bf16* in, const float* bias, int32_t images, int32_t h, int32_t w, int32_t channels,
                             bf16* out, cudaStream_t stream) {
  if (images <= 0 || h <= 0 || w <= 0) return cudaSuccess;
  if (channels <= 0 || channels % 8 != 0 || images > 65535 || !Aligned16(in) || !Aligned16(out))
    return cudaErrorInvalidValue;
  const int64_t out_vecs = int64_t{4} * h * w * (channels / 8);
  if (out_vecs > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid(PerImageBlocks(out_vecs, images), static_cast<unsigned>(images));
  Upsample2xKernel<<<grid, kThreads, 0, stream>>>(in, bias, h, w, channels / 8, static_cast<int32_t>(out_vecs), out);
  return cudaGetLastError();
}

cudaError_t VqNhwcAddBias(bf16* x, const float* bias, int64_t rows, int32_t channels, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (channels <= 0 || channels % 8 != 0 || !Aligned16(x)) return cudaErrorInvalidValue;
  const int64_t total = rows * (channels / 8);
  AddBiasKernel<<<Blocks(total), kThreads, 0, stream>>>(x, bias, total, channels / 8);
  return cudaGetLastError();
}

cudaError_t VqNhwcAffineSwish(const bf16* in, const float* scale, const float* shift, int64_t rows, int32_t channels,
                              bf16* out, cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  if (channels <= 0 || channels % 8 != 0 || shift == nullptr || !Aligned16(in) || !Aligned16(out))
    return cudaErrorInvalidValue;
  const int64_t total = rows * (channels / 8);
  AffineSwishKernel<<<Blocks(total), kThreads, 0, stream>>>(in, scale, shift, total, channels / 8, out);
  return cudaGetLastError();
}

cudaError_t VqNhwcSpatialModulate(bf16* x, const float* cond, const float* cond_bias, int32_t images, int32_t h,
                                  int32_t w, int32_t zh, int32_t zw, int32_t channels, bool swish,
                                  cudaStream_t stream) {
  if (images <= 0 || h <= 0 || w <= 0) return cudaSuccess;
  if (channels <= 0 || channels % 8 != 0 || images > 65535 || zh <= 0 || zw <= 0 || zh > h || zw > w ||
      cond == nullptr || cond_bias == nullptr || !Aligned16(x))
    return cudaErrorInvalidValue;
  const int64_t per_image_vecs = int64_t{h} * w * (channels / 8);
  const dim3 grid(PerImageBlocks(per_image_vecs, images), static_cast<unsigned>(images));
  SpatialModulateKernel<<<grid, kThreads, 0, stream>>>(x, cond, cond_bias, h, w, zh, zw, channels / 8, per_image_vecs,
                                                       swish);
  return cudaGetLastError();
}

cudaError_t VqSoftmaxRowsToBf16(const float* scores, int64_t rows, int32_t n, bf16* probs, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return cudaSuccess;
  const int64_t blocks = (rows + kSoftmaxWarps - 1) / kSoftmaxWarps;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  SoftmaxToBf16Kernel<<<static_cast<unsigned>(blocks), kSoftmaxWarps * 32, 0, stream>>>(scores, rows, n, probs);
  return cudaGetLastError();
}

cudaError_t VqNhwcConvOut3(const bf16* in, const float* weight_t, const float* bias, int32_t images, int32_t h,
                           int32_t w, int32_t cin, float* out, int64_t plane_stride, cudaStream_t stream) {
  const int64_t total = int64_t{images} * h * w;
  if (total <= 0) return cudaSuccess;
  if (cin <= 0 || cin % 8 != 0 || cin > kVqConvOutMaxChannels || !Aligned16(in) || !Aligned16(weight_t) ||
      plane_stride < total) {
    return cudaErrorInvalidValue;
  }
  const int32_t vecs = cin / 8;
  if (vecs <= 1) return LaunchConvOut<1>(in, weight_t, bias, h, w, cin, total, out, plane_stride, stream);
  if (vecs <= 2) return LaunchConvOut<2>(in, weight_t, bias, h, w, cin, total, out, plane_stride, stream);
  if (vecs <= 4) return LaunchConvOut<4>(in, weight_t, bias, h, w, cin, total, out, plane_stride, stream);
  if (vecs <= 8) return LaunchConvOut<8>(in, weight_t, bias, h, w, cin, total, out, plane_stride, stream);
  if (vecs <= 16) return LaunchConvOut<16>(in, weight_t, bias, h, w, cin, total, out, plane_stride, stream);
  return LaunchConvOut<32>(in, weight_t, bias, h, w, cin, total, out, plane_stride, stream);
}

}  // namespace argen::kernels
