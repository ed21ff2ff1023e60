#include "kernels/skinny_linear.h"

#include <atomic>
#include <cstdint>

namespace argen::kernels {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kWarps = 8;     // a block: 8 warps, 8 / S columns of S warps each
constexpr int kInFlight = 8;  // 16-byte weight loads a lane issues before it uses the first
constexpr int kMaxDevices = 16;

// A 16-byte weight load that skips L1 (the input rows live there) and asks
// L2 for the whole 256-byte sector run: each weight is read exactly once.
__device__ __forceinline__ uint4 LoadStreaming(const uint4* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

__device__ __forceinline__ float Lo(uint32_t pair) { return __uint_as_float(pair << 16); }
__device__ __forceinline__ float Hi(uint32_t pair) { return __uint_as_float(pair & 0xffff0000u); }

// acc += dot(w's 8 bf16, x's 8 bf16).
__device__ __forceinline__ float Dot8(const uint4& w, const uint4& x, float acc) {
  acc = fmaf(Lo(w.x), Lo(x.x), acc);
  acc = fmaf(Hi(w.x), Hi(x.x), acc);
  acc = fmaf(Lo(w.y), Lo(x.y), acc);
  acc = fmaf(Hi(w.y), Hi(x.y), acc);
  acc = fmaf(Lo(w.z), Lo(x.z), acc);
  acc = fmaf(Hi(w.z), Hi(x.z), acc);
  acc = fmaf(Lo(w.w), Lo(x.w), acc);
  acc = fmaf(Hi(w.w), Hi(x.w), acc);
  return acc;
}

// Rows R, S warps a column. Warp `part` of a column reads the column's
// 16-byte chunks part * 32 + lane + i * 32 * S: the S warps together sweep
// the weight row front to back.
template <int R, int S>
__global__ void __launch_bounds__(kWarps * 32)
    SkinnyLinearKernel(const bf16* __restrict__ x, const bf16* __restrict__ w, int in, int out, float* __restrict__ y,
                       float beta) {
  constexpr int kColumns = kWarps / S;
  __shared__ float partial[kWarps][R];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int part = warp % S;
  const int column = blockIdx.x * kColumns + warp / S;
  const bool live = column < out;
  const int chunks = in >> 3;
  float acc[R];
#pragma unroll
  for (int r = 0; r < R; ++r) acc[r] = 0.f;
  if (live) {
    const uint4* wr = reinterpret_cast<const uint4*>(w + static_cast<int64_t>(column) * in);
    const uint4* xr = reinterpret_cast<const uint4*>(x);
    constexpr int kStride = 32 * S;
    for (int k0 = part * 32 + lane; k0 < chunks; k0 += kStride * kInFlight) {
      uint4 wv[kInFlight];
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) {
        const int k = k0 + u * kStride;
        wv[u] = k < chunks ? LoadStreaming(wr + k) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
      for (int u = 0; u < kInFlight; ++u) {
        const int k = k0 + u * kStride;
        if (k < chunks) {
#pragma unroll
          for (int r = 0; r < R; ++r) acc[r] = Dot8(wv[u], __ldg(xr + static_cast<int64_t>(r) * chunks + k), acc[r]);
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], o);
  }
  if constexpr (S == 1) {
    if (live && lane < R) {
      float v = acc[0];
#pragma unroll
      for (int r = 1; r < R; ++r) v = lane == r ? acc[r] : v;
      float* out_at = y + static_cast<int64_t>(lane) * out + column;
      *out_at = beta != 0.f ? v + beta * *out_at : v;
    }
  } else {
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < R; ++r) partial[warp][r] = acc[r];
    }
    __syncthreads();
    // The column's first warp adds its S parts in order (bitwise repeatable).
    if (live && part == 0 && lane < R) {
      float v = 0.f;
#pragma unroll
      for (int p = 0; p < S; ++p) v += partial[warp + p][lane];
      float* out_at = y + static_cast<int64_t>(lane) * out + column;
      *out_at = beta != 0.f ? v + beta * *out_at : v;
    }
  }
}

using KernelFn = void (*)(const bf16*, const bf16*, int, int, float*, float);

template <int R>
KernelFn KernelFor(int s) {
  switch (s) {
    case 1:
      return SkinnyLinearKernel<R, 1>;
    case 2:
      return SkinnyLinearKernel<R, 2>;
    case 4:
      return SkinnyLinearKernel<R, 4>;
    default:
      return SkinnyLinearKernel<R, 8>;
  }
}

KernelFn Kernel(int rows, int s) {
  switch (rows) {
    case 1:
      return KernelFor<1>(s);
    case 2:
      return KernelFor<2>(s);
    case 3:
      return KernelFor<3>(s);
    default:
      return KernelFor<4>(s);
  }
}

constexpr int kSplits[] = {1, 2, 4, 8};

// The card's resident warps for (rows, split): SMs x blocks an SM x 8,
// measured once a device (the occupancy depends on the kernel's registers).
int ResidentWarps(int rows, int split_index) {
  // Threads may ask at once (a backend's streams): each writes the same value.
  static std::atomic<int> cache[kMaxDevices][kSkinnyLinearMaxRows][4];
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= kMaxDevices) device = 0;
  std::atomic<int>& cached = cache[device][rows - 1][split_index];
  int warps = cached.load(std::memory_order_relaxed);
  if (warps == 0) {
    int sms = 0, blocks = 0;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, Kernel(rows, kSplits[split_index]), kWarps * 32, 0);
    warps = sms > 0 && blocks > 0 ? sms * blocks * kWarps : 1;
    cached.store(warps, std::memory_order_relaxed);
  }
  return warps;
}

}  // namespace

bool SkinnyLinearSupported(const bf16* x, const bf16* w, int rows, int in, int out) {
  return x != nullptr && w != nullptr && rows >= 1 && rows <= kSkinnyLinearMaxRows && in >= 8 && in % 8 == 0 &&
         out >= 1 && reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0;
}

void SkinnyLinearPrepare() {
  for (int rows = 1; rows <= kSkinnyLinearMaxRows; ++rows)
    for (int i = 0; i < 4; ++i) ResidentWarps(rows, i);
}

int SkinnyLinearSplit(int rows, int in, int out) {
  if (rows < 1 || rows > kSkinnyLinearMaxRows || in < 8) return 1;
  const int chunks = in / 8;
  int best = 1;
  double best_fill = -1;
  for (int i = 0; i < 4; ++i) {
    const int s = kSplits[i];
    if (s > 1 && chunks < 32 * s * 2) break;  // fewer than two chunks a lane: the split only adds a reduction
    const int64_t warps = int64_t{out} * s;
    const int64_t resident = ResidentWarps(rows, i);
    const int64_t waves = (warps + resident - 1) / resident;
    const double fill = static_cast<double>(warps) / static_cast<double>(waves * resident);
    if (fill > best_fill * 1.05) {  // a split must fill 5% more of the card than a smaller one
      best_fill = fill;
      best = s;
    }
  }
  return best;
}

cudaError_t SkinnyLinearBf16(const bf16* x, const bf16* w, int rows, int in, int out, float* y, float beta,
                             cudaStream_t stream) {
  if (!SkinnyLinearSupported(x, w, rows, in, out) || y == nullptr) return cudaErrorInvalidValue;
  const int s = SkinnyLinearSplit(rows, in, out);
  const int columns_per_block = kWarps / s;
  const unsigned blocks = static_cast<unsigned>((out + columns_per_block - 1) / columns_per_block);
  Kernel(rows, s)<<<blocks, kWarps * 32, 0, stream>>>(x, w, in, out, y, beta);
  return cudaGetLastError();
}

}  // namespace argen::kernels
