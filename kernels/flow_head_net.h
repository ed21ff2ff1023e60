// The flow head's whole net evaluation as one persistent kernel (engine/cuda/
// device_flow_head.h; the chain of kernels/flow_head_gemm.h and
// kernels/flow_head_kernels.h does the same in ~50 launches).
//
// Why: at 64 images the net runs on 128 rows, 51 times a token, 12 blocks
// deep. As a chain of launches (cuBLAS GEMMs of 12-24 blocks, a bias+SiLU and
// a residual+norm kernel between them) it measured ~300 us an evaluation
// where its GEMMs alone take ~110 us: the rest is launch gaps and GEMMs whose
// few blocks cannot pull the 4.7 MB of weights each from memory at the
// card's rate (docs/PERFORMANCE.md, #31). Here one cooperative launch of a
// block per SM runs every phase, all SMs on each, with a grid barrier
// between phases: input_proj; per block the adaLN norm, fc1 (+bias, SiLU),
// fc2 (+bias, gate and residual); the final norm and linear.
//
// A GEMM phase tiles the output 32 rows x (8 nb) columns, as many tiles as
// blocks where it can; a block's eight warps split k (32 at a time) and each
// multiplies its share with m16n8k16 bf16 MMAs (fp32 accumulators), loading
// operands straight from global memory (k permuted inside a 32-wide chunk so
// a lane's operands are whole 16-byte loads); the warps' partial tiles are
// summed in shared memory in a fixed order and the epilogue applied, so
// results do not vary between runs. The norms are the chain's (one row a
// block, double statistics, eps 1e-6).
//
// Everything on `stream`, no allocation, no sync; capturable (a cooperative
// kernel node).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace argen::kernels {

constexpr int kFlowNetMaxBlocks = 32;

struct FlowNetBlockWeights {
  const float* ln_weight = nullptr;  // [width], with ln_bias
  const float* ln_bias = nullptr;
  const __nv_bfloat16* fc1_w = nullptr;  // [width x width]
  const float* fc1_b = nullptr;
  const __nv_bfloat16* fc2_w = nullptr;
  const float* fc2_b = nullptr;
};

struct FlowNetArgs {
  int rows = 0, width = 0, token_dim = 0, blocks = 0;
  const __nv_bfloat16* x_in = nullptr;     // [rows x token_dim]
  const __nv_bfloat16* input_w = nullptr;  // [width x token_dim]
  const float* input_b = nullptr;
  FlowNetBlockWeights block[kFlowNetMaxBlocks];
  // The adaLN modulations without their bias, [rows x mod_stride]: block b's shift, scale and gate at 3bW, 3bW + W,
  // 3bW + 2W, the final layer's shift and scale after them; mod_bias [mod_stride] is added as they are read.
  const float* mod = nullptr;
  const float* mod_bias = nullptr;
  int64_t mod_stride = 0;
  const __nv_bfloat16* final_w = nullptr;  // [token_dim x width]
  const float* final_b = nullptr;
  // Workspaces: h [rows x width] (the residual stream), hn and act [rows x width] (a GEMM's input); v [rows x
  // token_dim] the velocity out.
  float* h = nullptr;
  __nv_bfloat16* hn = nullptr;
  __nv_bfloat16* act = nullptr;
  float* v = nullptr;
};

// width and token_dim multiples of 8, width at most 8 x 256 (the norms hold
// a row in registers), 1..kFlowNetMaxBlocks blocks.
bool FlowNetShapeSupported(int width, int token_dim, int blocks);

// The blocks a launch runs (one an SM), or 0 where cooperative launches are
// not available (the caller keeps the chain).
int FlowNetGridBlocks();

// v = the net at x_in under the modulations; cudaErrorInvalidValue for an
// unsupported shape, a missing pointer or a misaligned bf16 operand.
cudaError_t FlowNet(const FlowNetArgs& args, cudaStream_t stream);

}  // namespace argen::kernels
