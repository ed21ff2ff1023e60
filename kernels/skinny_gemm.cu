#include <algorithm>

#include "kernels/skinny_gemm.h"

namespace argen::kernels {
namespace {

constexpr int kWarps = 4;
constexpr int kTilesPerWarp = 2;  // n-tiles of 8 columns
constexpr int kStages = 5;        // cp.async pipeline depth (4 stages in flight while one is used)
constexpr int kRowBytes = kSkinnyStageKeys * 2;                // one W row of a stage: 128 bytes, 8 units of 16
constexpr int kStageBytes = kSkinnyBlockCols * kRowBytes;      // 8 KiB
constexpr int kCopiesPerThread = kStageBytes / 16 / (kWarps * 32);

static_assert(kWarps * kTilesPerWarp * 8 == kSkinnyBlockCols, "block columns");
static_assert(kCopiesPerThread * 16 * kWarps * 32 == kStageBytes, "stage copies");

__device__ __forceinline__ void CpAsync16(uint32_t smem, const void* gmem) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(smem), "l"(gmem) : "memory");
}
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Byte offset of 16-byte unit `u` (0..7) of W row `r` inside a stage: rows r and
// r + 1 (the two rows one quarter-warp reads) use opposite halves of the banks.
__device__ __forceinline__ int SwizzledOffset(int r, int u) { return r * kRowBytes + ((u ^ ((r & 1) << 2)) << 4); }

__device__ __forceinline__ void Mma(float c[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                    uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Grid (ceil(out / 64), splits), 128 threads. MT m-tiles of 16 rows.
template <int MT>
__global__ void __launch_bounds__(kWarps * 32) SkinnyGemmKernel(SkinnyGemmArgs a) {
  __shared__ __align__(128) unsigned char smem[kStages * kStageBytes];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;  // the MMA fragments' group and thread-in-group
  const int stages = a.in / kSkinnyStageKeys;
  const int per_split = (stages + a.splits - 1) / a.splits;
  const int s_begin = blockIdx.y * per_split, s_count = max(0, min(stages, s_begin + per_split) - s_begin);
  const int n_block = blockIdx.x * kSkinnyBlockCols;
  const uint32_t smem_base = static_cast<uint32_t>(__cvta_generic_to_shared(smem));

  // The copies of one stage: thread i moves units q = j * 128 + i (row q / 8, unit q % 8).
  auto load_stage = [&](int s, int buf) {
    const int k0 = (s_begin + s) * kSkinnyStageKeys;
#pragma unroll
    for (int j = 0; j < kCopiesPerThread; ++j) {
      const int q = j * kWarps * 32 + threadIdx.x, r = q >> 3, u = q & 7;
      if (n_block + r < a.out) {
        CpAsync16(smem_base + buf * kStageBytes + SwizzledOffset(r, u),
                  a.w + static_cast<int64_t>(n_block + r) * a.in + k0 + u * 8);
      }
    }
  };

  bool tile_on[kTilesPerWarp];
  int tile_row[kTilesPerWarp];  // this lane's W row of each n-tile, inside the block
#pragma unroll
  for (int j = 0; j < kTilesPerWarp; ++j) {
    tile_row[j] = warp * kTilesPerWarp * 8 + j * 8 + g;
    tile_on[j] = n_block + warp * kTilesPerWarp * 8 + j * 8 < a.out;  // out % 8 == 0: all in or all out
  }
  const __nv_bfloat16* x_row[MT][2];
  bool row_on[MT][2];
#pragma unroll
  for (int m = 0; m < MT; ++m) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = m * 16 + h * 8 + g;
      row_on[m][h] = r < a.rows;
      x_row[m][h] = a.x + static_cast<int64_t>(row_on[m][h] ? r : 0) * a.in + t * 8;
    }
  }
  float acc[MT][kTilesPerWarp][4];
#pragma unroll
  for (int m = 0; m < MT; ++m)
#pragma unroll
    for (int j = 0; j < kTilesPerWarp; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[m][j][i] = 0.f;

#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < s_count) load_stage(s, s);
    CpAsyncCommit();  // empty groups keep the count uniform
  }
  for (int s = 0; s < s_count; ++s) {
    CpAsyncWait<kStages - 2>();  // stage s has landed (this thread's copies)
    __syncthreads();             // everyone's copies, and everyone is done with stage s - 1's buffer
    const int next = s + kStages - 1;
    if (next < s_count) load_stage(next, next % kStages);
    CpAsyncCommit();
    const unsigned char* stage = smem + (s % kStages) * kStageBytes;
    const int k0 = (s_begin + s) * kSkinnyStageKeys;
#pragma unroll
    for (int c = 0; c < 2; ++c) {  // two 32-key chunks a stage
      uint4 wv[kTilesPerWarp];
#pragma unroll
      for (int j = 0; j < kTilesPerWarp; ++j) {
        wv[j] = *reinterpret_cast<const uint4*>(stage + SwizzledOffset(tile_row[j], c * 4 + t));
      }
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        const int k = k0 + c * 32;
        const uint4 lo = row_on[m][0] ? __ldg(reinterpret_cast<const uint4*>(x_row[m][0] + k)) : make_uint4(0, 0, 0, 0);
        const uint4 hi = row_on[m][1] ? __ldg(reinterpret_cast<const uint4*>(x_row[m][1] + k)) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int j = 0; j < kTilesPerWarp; ++j) {
          if (!tile_on[j]) continue;
          // Keys 8t + {0,1 | 2,3} are the first MMA's k pairs (t*2, t*2 + 8), 8t + {4,5 | 6,7} the second's.
          Mma(acc[m][j], lo.x, hi.x, lo.y, hi.y, wv[j].x, wv[j].y);
          Mma(acc[m][j], lo.z, hi.z, lo.w, hi.w, wv[j].z, wv[j].w);
        }
      }
    }
  }
  CpAsyncWait<0>();

  // C fragment: (row g, cols 2t, 2t+1) in acc[0..1], (row g + 8, same cols) in acc[2..3].
  float* dst = a.splits > 1 ? a.partials + static_cast<int64_t>(blockIdx.y) * a.rows * a.out : a.y;
  const int n_warp = n_block + warp * kTilesPerWarp * 8;
#pragma unroll
  for (int m = 0; m < MT; ++m) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      if (!row_on[m][h]) continue;
      const int r = m * 16 + h * 8 + g;
#pragma unroll
      for (int j = 0; j < kTilesPerWarp; ++j) {
        if (!tile_on[j]) continue;
        float2* p = reinterpret_cast<float2*>(dst + static_cast<int64_t>(r) * a.out + n_warp + j * 8 + 2 * t);
        float2 v = make_float2(acc[m][j][2 * h], acc[m][j][2 * h + 1]);
        if (a.splits == 1 && a.beta != 0.f) {
          const float2 old = *p;
          v.x += a.beta * old.x;
          v.y += a.beta * old.y;
        }
        *p = v;
      }
    }
  }
}

// y = sum over splits of the partials (in split order) + beta * y; float4 per thread.
__global__ void SkinnyReduceKernel(const float* __restrict__ partials, float* __restrict__ y, int64_t n4,
                                   int32_t splits, float beta) {
  const int64_t stride = n4;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n4;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float4 s = reinterpret_cast<const float4*>(partials)[i];
    for (int p = 1; p < splits; ++p) {
      const float4 v = reinterpret_cast<const float4*>(partials)[p * stride + i];
      s.x += v.x;
      s.y += v.y;
      s.z += v.z;
      s.w += v.w;
    }
    float4* out = reinterpret_cast<float4*>(y) + i;
    if (beta != 0.f) {
      const float4 old = *out;
      s.x += beta * old.x;
      s.y += beta * old.y;
      s.z += beta * old.z;
      s.w += beta * old.w;
    }
    *out = s;
  }
}

}  // namespace

bool SkinnyGemmSupported(int32_t rows, int32_t in, int32_t out) {
  return rows >= 1 && rows <= kSkinnyMaxRows && in > 0 && in % kSkinnyStageKeys == 0 && out > 0 && out % 8 == 0;
}

size_t SkinnyWorkspaceBytes(int32_t rows, int32_t out, int32_t splits) {
  return splits > 1 ? static_cast<size_t>(splits) * rows * out * sizeof(float) : 0;
}

int32_t ChooseSkinnySplits(int32_t rows, int32_t in, int32_t out, int32_t sm_count, size_t max_workspace_bytes) {
  const int32_t col_blocks = (out + kSkinnyBlockCols - 1) / kSkinnyBlockCols;
  const int32_t stages = in / kSkinnyStageKeys;
  int32_t splits = std::max(1, (2 * std::max(sm_count, 1) + col_blocks - 1) / col_blocks);
  splits = std::min(splits, std::max(1, stages / 4));
  while (splits > 1 && SkinnyWorkspaceBytes(rows, out, splits) > max_workspace_bytes) --splits;
  return splits;
}

cudaError_t SkinnyGemm(const SkinnyGemmArgs& a, cudaStream_t stream) {
  if (!SkinnyGemmSupported(a.rows, a.in, a.out) || a.splits < 1 || a.x == nullptr || a.w == nullptr ||
      a.y == nullptr || (a.splits > 1 && a.partials == nullptr)) {
    return cudaErrorInvalidValue;
  }
  const dim3 grid((a.out + kSkinnyBlockCols - 1) / kSkinnyBlockCols, a.splits);
  if (a.rows <= 16)
    SkinnyGemmKernel<1><<<grid, kWarps * 32, 0, stream>>>(a);
  else
    SkinnyGemmKernel<2><<<grid, kWarps * 32, 0, stream>>>(a);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess || a.splits == 1) return e;
  const int64_t n4 = static_cast<int64_t>(a.rows) * a.out / 4;  // out % 8 == 0
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<int64_t>((n4 + threads - 1) / threads, 4096));
  SkinnyReduceKernel<<<blocks, threads, 0, stream>>>(a.partials, a.y, n4, a.splits, a.beta);
  return cudaGetLastError();
}

}  // namespace argen::kernels
