#include <algorithm>

#include "kernels/skinny_gemm.h"

namespace argen::kernels {
namespace {

constexpr int kWarps = 4;
constexpr int kTilesPerWarp = 4;  // n-tiles of 8 columns
constexpr int kUnroll = 4;        // chunks of W loaded before their MMAs

static_assert(kWarps * kTilesPerWarp * 8 == kSkinnyBlockCols, "block columns");

__device__ __forceinline__ uint4 LoadStreaming(const __nv_bfloat16* p) {
  // W is read once per step: do not let it evict x from L1.
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ void Mma(float c[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                    uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// Grid (ceil(out / 128), splits), 128 threads. MT m-tiles of 16 rows.
template <int MT>
__global__ void __launch_bounds__(kWarps * 32) SkinnyGemmKernel(SkinnyGemmArgs a) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, t = lane & 3;  // the MMA fragments' group and thread-in-group
  const int chunks = a.in / kSkinnyChunk;
  const int per_split = (chunks + a.splits - 1) / a.splits;
  const int c_begin = blockIdx.y * per_split, c_end = min(chunks, c_begin + per_split);
  const int n_warp = blockIdx.x * kSkinnyBlockCols + warp * kTilesPerWarp * 8;

  // This lane's W rows (one per n-tile) and x rows (two per m-tile), at its 8 keys of a chunk.
  const __nv_bfloat16* w_row[kTilesPerWarp];
  bool tile_on[kTilesPerWarp];
#pragma unroll
  for (int j = 0; j < kTilesPerWarp; ++j) {
    const int n0 = n_warp + j * 8;
    tile_on[j] = n0 < a.out;  // out % 8 == 0: a tile is all in or all out
    w_row[j] = a.w + static_cast<int64_t>(tile_on[j] ? n0 + g : 0) * a.in + t * 8;
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

  for (int c0 = c_begin; c0 < c_end; c0 += kUnroll) {
    uint4 wv[kUnroll][kTilesPerWarp];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int k = (c0 + u) * kSkinnyChunk;
#pragma unroll
      for (int j = 0; j < kTilesPerWarp; ++j) {
        wv[u][j] = (c0 + u < c_end && tile_on[j]) ? LoadStreaming(w_row[j] + k) : make_uint4(0, 0, 0, 0);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (c0 + u >= c_end) break;  // uniform across the block
      const int k = (c0 + u) * kSkinnyChunk;
#pragma unroll
      for (int m = 0; m < MT; ++m) {
        const uint4 lo = row_on[m][0] ? *reinterpret_cast<const uint4*>(x_row[m][0] + k) : make_uint4(0, 0, 0, 0);
        const uint4 hi = row_on[m][1] ? *reinterpret_cast<const uint4*>(x_row[m][1] + k) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int j = 0; j < kTilesPerWarp; ++j) {
          // Keys 8t + {0,1 | 2,3} are the first MMA's k pairs (t*2, t*2 + 8), 8t + {4,5 | 6,7} the second's.
          Mma(acc[m][j], lo.x, hi.x, lo.y, hi.y, wv[u][j].x, wv[u][j].y);
          Mma(acc[m][j], lo.z, hi.z, lo.w, hi.w, wv[u][j].z, wv[u][j].w);
        }
      }
    }
  }

  // C fragment: (row g, cols 2t, 2t+1) in acc[0..1], (row g + 8, same cols) in acc[2..3].
  float* dst = a.splits > 1 ? a.partials + static_cast<int64_t>(blockIdx.y) * a.rows * a.out : a.y;
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
  return rows >= 1 && rows <= kSkinnyMaxRows && in > 0 && in % kSkinnyChunk == 0 && out > 0 && out % 8 == 0;
}

size_t SkinnyWorkspaceBytes(int32_t rows, int32_t out, int32_t splits) {
  return splits > 1 ? static_cast<size_t>(splits) * rows * out * sizeof(float) : 0;
}

int32_t ChooseSkinnySplits(int32_t rows, int32_t in, int32_t out, int32_t sm_count, size_t max_workspace_bytes) {
  const int32_t col_blocks = (out + kSkinnyBlockCols - 1) / kSkinnyBlockCols;
  const int32_t chunks = in / kSkinnyChunk;
  int32_t splits = std::max(1, (2 * std::max(sm_count, 1) + col_blocks - 1) / col_blocks);
  splits = std::min(splits, std::max(1, chunks / (2 * kUnroll)));
  while (splits > 1 && SkinnyWorkspaceBytes(rows, out, splits) > max_workspace_bytes) --splits;
  return splits;
}

cudaError_t SkinnyGemm(const SkinnyGemmArgs& a, cudaStream_t stream) {
  if (!SkinnyGemmSupported(a.rows, a.in, a.out) || a.splits < 1 || a.x == nullptr || a.w == nullptr ||
      a.y == nullptr || (a.splits > 1 && a.partials == nullptr)) {
    return cudaErrorInvalidValue;
  }
  const dim3 grid((a.out + kSkinnyBlockCols - 1) / kSkinnyBlockCols, a.splits);
  const int mt = (a.rows + 15) / 16;
  switch (mt) {
    case 1:
      SkinnyGemmKernel<1><<<grid, kWarps * 32, 0, stream>>>(a);
      break;
    case 2:
      SkinnyGemmKernel<2><<<grid, kWarps * 32, 0, stream>>>(a);
      break;
    case 3:
      SkinnyGemmKernel<3><<<grid, kWarps * 32, 0, stream>>>(a);
      break;
    default:
      SkinnyGemmKernel<4><<<grid, kWarps * 32, 0, stream>>>(a);
      break;
  }
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess || a.splits == 1) return e;
  const int64_t n4 = static_cast<int64_t>(a.rows) * a.out / 4;  // out % 8 == 0
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<int64_t>((n4 + threads - 1) / threads, 4096));
  SkinnyReduceKernel<<<blocks, threads, 0, stream>>>(a.partials, a.y, n4, a.splits, a.beta);
  return cudaGetLastError();
}

}  // namespace argen::kernels
