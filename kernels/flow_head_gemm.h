// The flow head's GEMMs (engine/cuda/device_flow_head.h): y = x W^T for a
// torch Linear weight W [n x k], bf16 inputs, fp32 accumulation, with the
// head's epilogues fused. Built for its shapes: few rows (2 per image), k and
// n up to ~1.7k, run 51 times per token 12 blocks deep. cuBLAS spends a few
// microseconds of launch and setup on each such GEMM and needs a separate
// kernel for each bias and activation; here each block of 32 x 32 outputs
// holds its whole weight slice and input rows in shared memory, prefetches
// the weights before waiting for the kernel before it (programmatic dependent
// launch, kernels/pdl.cuh) and applies the epilogue itself. All on `stream`,
// no allocation, no sync (capturable).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace argen::kernels {

// k above this does not fit one block's shared memory (weights and inputs, k padded to 32).
constexpr int kFlowGemmMaxK = 1536;
// Up to this many rows a warp-per-column kernel can run (weights prefetched
// into registers, rows in shared memory: rows x k x 2 bytes of it, at most 48
// KiB; FlowGemmArgs::gemv_max_rows lowers it); above, tensor-core tiles. Its
// rows go one after another through each warp: at the head's shape the
// 16-row tiles beat it from 2 rows (docs/PERFORMANCE.md, 2026-12-04), so the
// device head sets gemv_max_rows 0 and keeps the kernel as an A/B option.
constexpr int kFlowGemvMaxRows = 16;
// Up to this many rows the tiles are 16 rows x 32 columns (k a multiple of 64), so
// that 17-32 rows take two rows of blocks, each loading half the inputs after its
// wait; above, 32 x 32.
constexpr int kFlowGemmSmallTileMaxRows = 32;

enum class FlowGemmEpilogue {
  kStoreF32,      // out_f32 = y (+ bias when set)
  kBiasSiluBf16,  // out_bf16 = bf16(SiLU(y + bias)); bias required
};

struct FlowGemmArgs {
  const __nv_bfloat16* x = nullptr;  // [rows x k], 16-byte aligned
  const __nv_bfloat16* w = nullptr;  // [n x k], 16-byte aligned
  int rows = 0, k = 0, n = 0;
  const float* bias = nullptr;  // [n]
  FlowGemmEpilogue epilogue = FlowGemmEpilogue::kStoreF32;
  float* out_f32 = nullptr;           // [rows x n]
  __nv_bfloat16* out_bf16 = nullptr;  // [rows x n]
  // The warp-per-column kernel up to this many rows (capped at kFlowGemvMaxRows), the tiles above.
  int gemv_max_rows = kFlowGemvMaxRows;
  // 16-row tiles up to kFlowGemmSmallTileMaxRows rows (false: 32-row tiles at every row count).
  bool small_tiles = true;
};

// One Linear of the head: y = x W^T (+ bias) into out_f32, or, when out_bf16
// is set, bf16(SiLU(y + bias)) into it (kBiasSiluBf16).
inline FlowGemmArgs FlowLinearArgs(int rows, const __nv_bfloat16* x, const __nv_bfloat16* w, int k, int n,
                                   const float* bias, float* out_f32, __nv_bfloat16* out_bf16) {
  FlowGemmArgs g;
  g.rows = rows;
  g.x = x;
  g.w = w;
  g.k = k;
  g.n = n;
  g.bias = bias;
  g.out_f32 = out_f32;
  g.out_bf16 = out_bf16;
  if (out_bf16 != nullptr) g.epilogue = FlowGemmEpilogue::kBiasSiluBf16;
  return g;
}

// k a multiple of 8 in [8, kFlowGemmMaxK] (kFlowGemvMaxRows rows of it fit 48 KiB),
// n >= 1.
bool FlowGemmShapeSupported(int k, int n);

// cudaErrorInvalidValue for an unsupported shape, a misaligned input or a
// missing output or bias.
cudaError_t FlowGemm(const FlowGemmArgs& args, cudaStream_t stream);

}  // namespace argen::kernels
