// The flow head's net as one persistent cooperative kernel (kernels/flow_head_net.h).
#include <cooperative_groups.h>

#include <cstdint>

#include "kernels/attention_mma.cuh"
#include "kernels/common.cuh"
#include "kernels/flow_head_net.h"

namespace argen::kernels {
namespace {

namespace cg = cooperative_groups;
using bf16 = __nv_bfloat16;
using detail::BlockSumDouble;

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kTileRows = 32;  // two m16 tiles
constexpr int kMaxGroups = 6;  // n8 column groups a tile at most
constexpr int kChunk = 32;     // k a warp takes per load: a 16-byte load a lane and row, two MMA steps
constexpr int kDepth = 2;      // chunks a warp has in flight (8 warps x 2 x 5 KB: ~80 KB a SM)
constexpr int kNormPer = 8;    // row elements a thread holds in a norm (width <= kNormPer * kThreads)
constexpr float kLayerNormEps = 1e-6f;
constexpr size_t kReduceFloats = static_cast<size_t>(kWarps) * kTileRows * kMaxGroups * 8;

__device__ __forceinline__ float Silu(float x) { return x / (1.0f + expf(-x)); }

enum class Out {
  kF32Bias,        // out_f32 = y + bias
  kSiluBf16,       // out_bf16 = bf16(SiLU(y + bias))
  kGatedResidual,  // out_f32 (h) += gate (y + bias), gate = mod[gate_at] + mod_bias[gate_at]
};

struct Phase {
  const bf16* a = nullptr;  // [rows x k]: made by an earlier phase of this launch (read through L2)
  const bf16* w = nullptr;  // [n x k]: weights
  int rows = 0, k = 0, n = 0;
  Out out = Out::kF32Bias;
  const float* bias = nullptr;  // [n]
  float* out_f32 = nullptr;
  bf16* out_bf16 = nullptr;
  const float* mod = nullptr;
  const float* mod_bias = nullptr;
  int64_t mod_stride = 0, gate_at = 0;
};

// Other blocks of this launch wrote it: past L1, which is not coherent between SMs.
__device__ __forceinline__ uint4 LoadShared16(const bf16* p) { return __ldcg(reinterpret_cast<const uint4*>(p)); }
__device__ __forceinline__ uint4 LoadWeight16(const bf16* p) { return __ldg(reinterpret_cast<const uint4*>(p)); }

__device__ __forceinline__ void Epilogue(const Phase& p, int row, int col, float y) {
  const int64_t at = static_cast<int64_t>(row) * p.n + col;
  switch (p.out) {
    case Out::kF32Bias:
      p.out_f32[at] = y + p.bias[col];
      break;
    case Out::kSiluBf16:
      p.out_bf16[at] = __float2bfloat16(Silu(y + p.bias[col]));
      break;
    case Out::kGatedResidual: {
      const float gate = p.mod[row * p.mod_stride + p.gate_at + col] + p.mod_bias[p.gate_at + col];
      p.out_f32[at] = __ldcg(p.out_f32 + at) + gate * (y + p.bias[col]);
      break;
    }
  }
}

// One tile: rows [r0, r0 + 32) x columns [n0, n0 + 8 G). Warp w multiplies k chunks w, w + 8, ... (kDepth of them
// loaded before their MMAs; pieces past k are zeros); lane (g, t) = (lane / 4, lane % 4) loads k [32 c + 8 t, + 8) of
// rows g, g + 8 of each m16 tile and of column g of each n8 group: words 2s and 2s + 1 of those loads are MMA step s's
// k pairs 2t and 2t + 8 for A and B alike (the dot product's order within a chunk does not matter).
template <int G>
__device__ void GemmTile(const Phase& p, int r0, int n0, float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int chunks = (p.k + kChunk - 1) / kChunk;
  float acc[2][G][4];
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int j = 0; j < G; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[m][j][e] = 0.f;
  const bf16* arow[2][2];
  bool aok[2][2];
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int row = r0 + 16 * m + g + 8 * hh;
      aok[m][hh] = row < p.rows;
      arow[m][hh] = p.a + static_cast<int64_t>(aok[m][hh] ? row : 0) * p.k + 8 * t;
    }
  const bf16* wcol[G];
  bool wok[G];
#pragma unroll
  for (int j = 0; j < G; ++j) {
    const int col = n0 + 8 * j + g;
    wok[j] = col < p.n;
    wcol[j] = p.w + static_cast<int64_t>(wok[j] ? col : 0) * p.k + 8 * t;
  }
  const uint4 zero = make_uint4(0, 0, 0, 0);
  for (int c0 = warp; c0 < chunks; c0 += kWarps * kDepth) {
    uint4 av[kDepth][2][2], wv[kDepth][G];
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      const int c = c0 + d * kWarps;
      const bool live = c < chunks && c * kChunk + 8 * t < p.k;  // k is a multiple of 8: a piece is whole or out
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh)
          av[d][m][hh] = live && aok[m][hh] ? LoadShared16(arow[m][hh] + c * kChunk) : zero;
#pragma unroll
      for (int j = 0; j < G; ++j) wv[d][j] = live && wok[j] ? LoadWeight16(wcol[j] + c * kChunk) : zero;
    }
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      if (c0 + d * kWarps >= chunks) break;
#pragma unroll
      for (int s = 0; s < 2; ++s) {
#pragma unroll
        for (int m = 0; m < 2; ++m) {
          const unsigned a[4] = {mma::Word(av[d][m][0], 2 * s), mma::Word(av[d][m][1], 2 * s),
                                 mma::Word(av[d][m][0], 2 * s + 1), mma::Word(av[d][m][1], 2 * s + 1)};
#pragma unroll
          for (int j = 0; j < G; ++j)
            mma::Mma16816(acc[m][j], a, mma::Word(wv[d][j], 2 * s), mma::Word(wv[d][j], 2 * s + 1));
        }
      }
    }
  }
  // The warps' partial tiles, summed in warp order.
  constexpr int ld = 8 * G;
  float* mine = red + warp * (kTileRows * ld);
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int j = 0; j < G; ++j) {
      const int row = 16 * m + g, col = 8 * j + 2 * t;
      *reinterpret_cast<float2*>(mine + row * ld + col) = make_float2(acc[m][j][0], acc[m][j][1]);
      *reinterpret_cast<float2*>(mine + (row + 8) * ld + col) = make_float2(acc[m][j][2], acc[m][j][3]);
    }
  __syncthreads();
  for (int i = threadIdx.x; i < kTileRows * ld; i += kThreads) {
    const int row = r0 + i / ld, col = n0 + i % ld;
    if (row >= p.rows || col >= p.n) continue;
    float y = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) y += red[w * (kTileRows * ld) + i];
    Epilogue(p, row, col, y);
  }
  __syncthreads();  // red is rewritten by the next tile
}

// How a GEMM of `rows` x n outputs is tiled over the launch's blocks: as many column groups a tile as spread them
// over every block (at most kMaxGroups), row tiles adjacent (the blocks that share a weight slice run together).
struct Tiling {
  int row_tiles, per, tiles;
  __device__ Tiling(int rows, int n) {
    const int groups = (n + 7) / 8;
    row_tiles = (rows + kTileRows - 1) / kTileRows;
    per = (groups * row_tiles + gridDim.x - 1) / gridDim.x;
    per = per < 1 ? 1 : (per > kMaxGroups ? kMaxGroups : per);
    tiles = row_tiles * ((groups + per - 1) / per);
  }
};

// Asks L2 for the weight rows this block's tiles of a later GEMM read (the blocks of a column slice's first row
// tile ask), so that GEMM finds them there: issued a phase ahead, the weights' trip from memory overlaps it.
__device__ void PrefetchWeights(const bf16* w, int rows, int k, int n) {
  const Tiling t(rows, n);
  const int lines =
      k * static_cast<int>(sizeof(bf16)) / 128;  // a weight row's whole 128-byte lines (a hint: a partial one is left)
  for (int tile = blockIdx.x; tile < t.tiles; tile += gridDim.x) {
    if (tile % t.row_tiles != 0) continue;
    const int n0 = (tile / t.row_tiles) * t.per * 8, cols = min(t.per * 8, n - n0);
    for (int i = threadIdx.x; i < cols * lines; i += kThreads) {
      const char* line =
          reinterpret_cast<const char*>(w + static_cast<int64_t>(n0 + i / lines) * k) + 128 * (i % lines);
      asm volatile("prefetch.global.L2 [%0];" ::"l"(line));
    }
  }
}

__device__ void GemmPhase(const Phase& p, float* red) {
  const Tiling tl(p.rows, p.n);
  for (int tile = blockIdx.x; tile < tl.tiles; tile += gridDim.x) {
    const int row_tiles = tl.row_tiles, per = tl.per;
    const int r0 = (tile % row_tiles) * kTileRows, n0 = (tile / row_tiles) * per * 8;
    switch (per) {
      case 1:
        GemmTile<1>(p, r0, n0, red);
        break;
      case 2:
        GemmTile<2>(p, r0, n0, red);
        break;
      case 3:
        GemmTile<3>(p, r0, n0, red);
        break;
      case 4:
        GemmTile<4>(p, r0, n0, red);
        break;
      case 5:
        GemmTile<5>(p, r0, n0, red);
        break;
      default:
        GemmTile<6>(p, r0, n0, red);
        break;
    }
  }
}

// hn = bf16(LN(h) (1 + scale) + shift), a block a row: the chain's residual+norm kernel without the residual
// (kernels/flow_head_kernels.cu: the same statistics, in the same order).
__device__ void NormPhase(const FlowNetArgs& a, int64_t shift_at, int64_t scale_at, const float* ln_weight,
                          const float* ln_bias, double* scratch) {
  const int W = a.width;
  for (int r = blockIdx.x; r < a.rows; r += gridDim.x) {
    const float* h = a.h + static_cast<int64_t>(r) * W;
    const float* mod = a.mod + r * a.mod_stride;
    float v[kNormPer];
    double sum = 0;
#pragma unroll
    for (int j = 0; j < kNormPer; ++j) {
      const int i = threadIdx.x + j * kThreads;
      v[j] = i < W ? __ldcg(h + i) : 0.f;
      sum += v[j];
    }
    const double mean = BlockSumDouble(sum, scratch) / W;
    double sq = 0;
#pragma unroll
    for (int j = 0; j < kNormPer; ++j) {
      const int i = threadIdx.x + j * kThreads;
      if (i < W) sq += (v[j] - mean) * (v[j] - mean);
    }
    const double var = BlockSumDouble(sq, scratch) / W;
    const float inv = static_cast<float>(1.0 / sqrt(var + kLayerNormEps)), mean_f = static_cast<float>(mean);
    bf16* out = a.hn + static_cast<int64_t>(r) * W;
#pragma unroll
    for (int j = 0; j < kNormPer; ++j) {
      const int i = threadIdx.x + j * kThreads;
      if (i >= W) continue;
      float n = (v[j] - mean_f) * inv;
      if (ln_weight != nullptr) n = n * ln_weight[i] + ln_bias[i];
      const float scale = mod[scale_at + i] + a.mod_bias[scale_at + i];
      const float shift = mod[shift_at + i] + a.mod_bias[shift_at + i];
      out[i] = __float2bfloat16(n * (1.0f + scale) + shift);
    }
  }
}

__global__ void __launch_bounds__(kThreads, 1) FlowNetKernel(FlowNetArgs a) {
  extern __shared__ __align__(16) float red[];
  __shared__ double scratch[kWarps];
  cg::grid_group grid = cg::this_grid();
  const int W = a.width, D = a.token_dim;

  Phase p;
  p.rows = a.rows;
  p.a = a.x_in;
  p.w = a.input_w;
  p.k = D;
  p.n = W;
  p.out = Out::kF32Bias;
  p.bias = a.input_b;
  p.out_f32 = a.h;
  PrefetchWeights(a.block[0].fc1_w, a.rows, W, W);
  GemmPhase(p, red);
  grid.sync();
  NormPhase(a, 0, W, a.block[0].ln_weight, a.block[0].ln_bias, scratch);
  grid.sync();
  p.k = W;
  p.mod = a.mod;
  p.mod_bias = a.mod_bias;
  p.mod_stride = a.mod_stride;
  for (int b = 0; b < a.blocks; ++b) {
    const FlowNetBlockWeights& blk = a.block[b];
    p.a = a.hn;
    p.w = blk.fc1_w;
    p.out = Out::kSiluBf16;
    p.bias = blk.fc1_b;
    p.out_bf16 = a.act;
    PrefetchWeights(blk.fc2_w, a.rows, W, W);  // the next phase's
    GemmPhase(p, red);
    grid.sync();
    p.a = a.act;
    p.w = blk.fc2_w;
    p.out = Out::kGatedResidual;
    p.bias = blk.fc2_b;
    p.out_f32 = a.h;
    p.gate_at = static_cast<int64_t>(b) * 3 * W + 2 * W;
    if (b + 1 < a.blocks) {
      PrefetchWeights(a.block[b + 1].fc1_w, a.rows, W, W);  // the phase after the norm's
    } else {
      PrefetchWeights(a.final_w, a.rows, W, D);
    }
    GemmPhase(p, red);
    grid.sync();
    const int64_t next = static_cast<int64_t>(b + 1) * 3 * W;  // the next block's (or the final layer's) shift
    const bool last = b + 1 == a.blocks;
    NormPhase(a, next, next + W, last ? nullptr : a.block[b + 1].ln_weight, last ? nullptr : a.block[b + 1].ln_bias,
              scratch);
    grid.sync();
  }
  p.a = a.hn;
  p.w = a.final_w;
  p.n = D;
  p.out = Out::kF32Bias;
  p.bias = a.final_b;
  p.out_f32 = a.v;
  GemmPhase(p, red);
}

constexpr size_t kSharedBytes = kReduceFloats * sizeof(float);

bool Aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

bool FlowNetShapeSupported(int width, int token_dim, int blocks) {
  return width >= 8 && width % 8 == 0 && width <= kNormPer * kThreads && token_dim >= 8 && token_dim % 8 == 0 &&
         blocks >= 1 && blocks <= kFlowNetMaxBlocks;
}

int FlowNetGridBlocks() {
  static const int blocks = [] {
    int device = 0, cooperative = 0, sms = 0, per_sm = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || cooperative == 0) {
      cudaGetLastError();
      return 0;
    }
    if (cudaFuncSetAttribute(FlowNetKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kSharedBytes)) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, FlowNetKernel, kThreads, kSharedBytes) != cudaSuccess ||
        per_sm < 1) {
      cudaGetLastError();
      return 0;
    }
    return sms;  // one a SM: co-resident whatever else the SM holds of this launch
  }();
  return blocks;
}

cudaError_t FlowNet(const FlowNetArgs& a, cudaStream_t stream) {
  if (a.rows <= 0) return cudaSuccess;
  if (!FlowNetShapeSupported(a.width, a.token_dim, a.blocks) || a.x_in == nullptr || a.input_w == nullptr ||
      a.input_b == nullptr || a.mod == nullptr || a.mod_bias == nullptr || a.final_w == nullptr ||
      a.final_b == nullptr || a.h == nullptr || a.hn == nullptr || a.act == nullptr || a.v == nullptr ||
      !Aligned16(a.x_in) || !Aligned16(a.input_w) || !Aligned16(a.final_w) || !Aligned16(a.hn) || !Aligned16(a.act)) {
    return cudaErrorInvalidValue;
  }
  for (int b = 0; b < a.blocks; ++b) {
    const FlowNetBlockWeights& blk = a.block[b];
    if (blk.ln_weight == nullptr || blk.ln_bias == nullptr || blk.fc1_w == nullptr || blk.fc1_b == nullptr ||
        blk.fc2_w == nullptr || blk.fc2_b == nullptr || !Aligned16(blk.fc1_w) || !Aligned16(blk.fc2_w)) {
      return cudaErrorInvalidValue;
    }
  }
  const int grid = FlowNetGridBlocks();
  if (grid == 0) return cudaErrorNotSupported;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(grid);
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = kSharedBytes;
  config.stream = stream;
  config.attrs = attr;
  config.numAttrs = 1;
  return cudaLaunchKernelEx(&config, FlowNetKernel, a);
}

}  // namespace argen::kernels
