// The flow head's fused GEMM (kernels/flow_head_gemm.h). One block computes a
// 32- (or, for few rows, 16-) row x 32-column tile of outputs: it copies its
// 32 weight rows (all of k) into shared memory before waiting for the
// previous kernel, then its input rows, and its eight warps each multiply
// one 16 x 16 piece over a half (a quarter) of k with bf16 tensor cores
// (fp32 accumulators); the parts are summed in a fixed order, so results do
// not vary between runs.
#include <mma.h>

#include <cstdint>

#include "kernels/flow_head_gemm.h"
#include "kernels/pdl.cuh"

namespace argen::kernels {
namespace {

namespace wmma = nvcuda::wmma;
using bf16 = __nv_bfloat16;

constexpr int kTile = 32;  // output columns per block; rows: kTileRows (32, or 16 for few rows)
constexpr int kWarps = 8;  // (kTileRows / 16) row quarters x 2 column quarters x the parts of k
constexpr int kThreads = kWarps * 32;
constexpr int kPad = 8;            // bf16 after each shared row: rows start on different banks
constexpr int kAccLd = kTile + 4;  // floats per row of the accumulator tiles

__host__ __device__ constexpr int PaddedK(int k) { return (k + 31) / 32 * 32; }

// The parts k is split into between a tile's warps: 2 for 32-row tiles, 4 for 16-row ones.
template <int kTileRows>
constexpr int KParts() {
  return kWarps / (kTileRows / 16 * 2);
}

template <int kTileRows>
__host__ __device__ constexpr size_t SharedBytes(int k) {
  return static_cast<size_t>(kTile + kTileRows) * (PaddedK(k) + kPad) * sizeof(bf16) +
         static_cast<size_t>(KParts<kTileRows>()) * kTileRows * kAccLd * sizeof(float);
}

__device__ __forceinline__ void CopyAsync16(void* shared, const void* global) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(global));
}

// Rows [row0, row0 + count) of a [rows x k] matrix into dst [count x ld]
// (asynchronously), zeros past its rows and past k up to kp.
__device__ void LoadRows(bf16* dst, int ld, const bf16* src, int row0, int count, int rows, int k, int kp) {
  const int chunks = kp / 8;  // 16-byte pieces of a padded row
  for (int i = threadIdx.x; i < count * chunks; i += kThreads) {
    const int r = i / chunks, c = i % chunks;
    bf16* d = dst + r * ld + c * 8;
    if (row0 + r < rows && c * 8 < k) {
      CopyAsync16(d, src + static_cast<int64_t>(row0 + r) * k + c * 8);
    } else {
      *reinterpret_cast<uint4*>(d) = make_uint4(0, 0, 0, 0);
    }
  }
}

__device__ __forceinline__ float Silu(float x) { return x / (1.0f + expf(-x)); }

template <FlowGemmEpilogue kEpilogue>
__device__ __forceinline__ void Store(const FlowGemmArgs& a, int row, int col, float y) {
  const int64_t at = static_cast<int64_t>(row) * a.n + col;
  if constexpr (kEpilogue == FlowGemmEpilogue::kBiasSiluBf16) {
    a.out_bf16[at] = __float2bfloat16(Silu(y + a.bias[col]));
  } else {
    a.out_f32[at] = a.bias != nullptr ? y + a.bias[col] : y;
  }
}

template <FlowGemmEpilogue kEpilogue, int kTileRows>
__global__ void __launch_bounds__(kThreads) FlowGemmKernel(FlowGemmArgs a) {
  constexpr int kRowQuarters = kTileRows / 16, kParts = KParts<kTileRows>();
  extern __shared__ __align__(128) unsigned char shared[];
  const int kp = PaddedK(a.k), ld = kp + kPad;
  bf16* w_tile = reinterpret_cast<bf16*>(shared);
  bf16* x_tile = w_tile + kTile * ld;
  float* acc_tiles = reinterpret_cast<float*>(x_tile + kTileRows * ld);  // [kParts][kTileRows][kAccLd]
  const int n0 = blockIdx.x * kTile, r0 = blockIdx.y * kTileRows;

  pdl::AllowDependents();
  LoadRows(w_tile, ld, a.w, n0, kTile, a.n, a.k, kp);  // weights: no kernel writes them
  asm volatile("cp.async.commit_group;\n" ::: "memory");
  pdl::WaitForPrerequisites();
  LoadRows(x_tile, ld, a.x, r0, kTileRows, a.rows, a.k, kp);
  asm volatile("cp.async.commit_group;\ncp.async.wait_all;\n" ::: "memory");
  __syncthreads();

  const int warp = threadIdx.x / 32;
  const int row_q = warp % kRowQuarters, col_q = (warp / kRowQuarters) & 1, part = warp / (kRowQuarters * 2);
  const int k_part = kp / kParts;  // a multiple of 16 (the launch checks)
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> xf;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> wf;  // W^T: W's rows are B's columns
  const bf16* xs = x_tile + row_q * 16 * ld;
  const bf16* ws = w_tile + col_q * 16 * ld;
  for (int kk = part * k_part; kk < (part + 1) * k_part; kk += 16) {
    wmma::load_matrix_sync(xf, xs + kk, ld);
    wmma::load_matrix_sync(wf, ws + kk, ld);
    wmma::mma_sync(acc, xf, wf, acc);
  }
  wmma::store_matrix_sync(acc_tiles + (part * kTileRows + row_q * 16) * kAccLd + col_q * 16, acc, kAccLd,
                          wmma::mem_row_major);
  __syncthreads();

  for (int i = threadIdx.x; i < kTileRows * kTile; i += kThreads) {
    const int r = i / kTile, c = i % kTile, row = r0 + r, col = n0 + c;
    if (row >= a.rows || col >= a.n) continue;
    float y = 0.f;
#pragma unroll
    for (int q = 0; q < kParts; ++q) y += acc_tiles[(q * kTileRows + r) * kAccLd + c];
    Store<kEpilogue>(a, row, col, y);
  }
}

// Few rows (kGemvMaxRows): a warp per kGemvCols output columns. Each lane
// loads its share of those columns' weights into registers before the wait
// (so the weight read overlaps the kernel before), then the rows into shared
// memory, and dots every row with them; lanes are summed in a fixed tree.
constexpr int kGemvWarps = 8;
constexpr int kGemvCols = 2;
constexpr int kGemvChunks = (kFlowGemmMaxK / 8 + 31) / 32;  // 16-byte weight pieces a lane holds per column

__device__ __forceinline__ float Dot8(uint4 x, uint4 w) {
  const __nv_bfloat162* xp = reinterpret_cast<const __nv_bfloat162*>(&x);
  const __nv_bfloat162* wp = reinterpret_cast<const __nv_bfloat162*>(&w);
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 xf = __bfloat1622float2(xp[i]), wf = __bfloat1622float2(wp[i]);
    s = fmaf(xf.x, wf.x, s);
    s = fmaf(xf.y, wf.y, s);
  }
  return s;
}

template <FlowGemmEpilogue kEpilogue>
__global__ void __launch_bounds__(kGemvWarps * 32) FlowGemvKernel(FlowGemmArgs a) {
  extern __shared__ __align__(16) unsigned char gemv_shared[];
  uint4* xs = reinterpret_cast<uint4*>(gemv_shared);  // [rows][k / 8]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int col0 = (blockIdx.x * kGemvWarps + warp) * kGemvCols;
  const int chunks = a.k / 8;
  pdl::AllowDependents();
  uint4 w[kGemvCols][kGemvChunks];
#pragma unroll
  for (int c = 0; c < kGemvCols; ++c) {
#pragma unroll
    for (int j = 0; j < kGemvChunks; ++j) {
      const int piece = lane + 32 * j;
      w[c][j] = (col0 + c < a.n && piece < chunks)
                    ? __ldg(reinterpret_cast<const uint4*>(a.w + static_cast<int64_t>(col0 + c) * a.k) + piece)
                    : make_uint4(0, 0, 0, 0);
    }
  }
  pdl::WaitForPrerequisites();
  const uint4* x = reinterpret_cast<const uint4*>(a.x);
  for (int i = threadIdx.x; i < a.rows * chunks; i += blockDim.x) xs[i] = x[i];
  __syncthreads();
  for (int r = 0; r < a.rows; ++r) {
    float acc[kGemvCols] = {};
#pragma unroll
    for (int j = 0; j < kGemvChunks; ++j) {
      const int piece = lane + 32 * j;
      if (piece < chunks) {
        const uint4 xv = xs[r * chunks + piece];
#pragma unroll
        for (int c = 0; c < kGemvCols; ++c) acc[c] += Dot8(xv, w[c][j]);
      }
    }
#pragma unroll
    for (int c = 0; c < kGemvCols; ++c) {
      for (int o = 16; o > 0; o >>= 1) acc[c] += __shfl_xor_sync(0xffffffffu, acc[c], o);
    }
    if (lane < kGemvCols && col0 + lane < a.n) {
      float y = acc[0];
#pragma unroll
      for (int c = 1; c < kGemvCols; ++c) y = lane == c ? acc[c] : y;
      Store<kEpilogue>(a, r, col0 + lane, y);
    }
  }
}

size_t GemvSharedBytes(const FlowGemmArgs& a) { return static_cast<size_t>(a.rows) * a.k * sizeof(bf16); }

template <FlowGemmEpilogue kEpilogue, int kTileRows>
cudaError_t LaunchTiles(const FlowGemmArgs& a, cudaStream_t stream) {
  static const cudaError_t attr =
      cudaFuncSetAttribute(FlowGemmKernel<kEpilogue, kTileRows>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(SharedBytes<kTileRows>(kFlowGemmMaxK)));
  if (attr != cudaSuccess) return attr;
  const dim3 grid((a.n + kTile - 1) / kTile, (a.rows + kTileRows - 1) / kTileRows);
  return pdl::Launch(FlowGemmKernel<kEpilogue, kTileRows>, grid, dim3(kThreads), SharedBytes<kTileRows>(a.k), stream,
                     a);
}

template <FlowGemmEpilogue kEpilogue>
cudaError_t Launch(const FlowGemmArgs& a, cudaStream_t stream) {
  if (a.rows <= kFlowGemvMaxRows && a.rows <= a.gemv_max_rows) {
    const int cols_per_block = kGemvWarps * kGemvCols;
    return pdl::Launch(FlowGemvKernel<kEpilogue>, dim3((a.n + cols_per_block - 1) / cols_per_block),
                       dim3(kGemvWarps * 32), GemvSharedBytes(a), stream, a);
  }
  if (a.small_tiles && a.rows <= kFlowGemmSmallTileMaxRows && PaddedK(a.k) % 64 == 0) {
    return LaunchTiles<kEpilogue, 16>(a, stream);
  }
  return LaunchTiles<kEpilogue, 32>(a, stream);
}

bool Aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

bool FlowGemmShapeSupported(int k, int n) {
  static_assert(kFlowGemvMaxRows * kFlowGemmMaxK * sizeof(bf16) <= 48 * 1024, "gemv rows past default shared memory");
  return k >= 8 && k <= kFlowGemmMaxK && k % 8 == 0 && n >= 1;
}

cudaError_t FlowGemm(const FlowGemmArgs& a, cudaStream_t stream) {
  if (a.rows <= 0) return cudaSuccess;
  if (!FlowGemmShapeSupported(a.k, a.n) || a.x == nullptr || a.w == nullptr || !Aligned16(a.x) || !Aligned16(a.w)) {
    return cudaErrorInvalidValue;
  }
  if (a.epilogue == FlowGemmEpilogue::kBiasSiluBf16) {
    if (a.out_bf16 == nullptr || a.bias == nullptr) return cudaErrorInvalidValue;
    return Launch<FlowGemmEpilogue::kBiasSiluBf16>(a, stream);
  }
  if (a.out_f32 == nullptr) return cudaErrorInvalidValue;
  return Launch<FlowGemmEpilogue::kStoreF32>(a, stream);
}

}  // namespace argen::kernels
