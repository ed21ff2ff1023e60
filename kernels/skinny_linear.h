// The decoder's Linears at one or two images: y = x W^T (+ beta y) for a
// torch Linear weight W [out x in] (bf16), x [rows x in] (bf16), rows <= 4,
// fp32 accumulation and output. At 2-4 rows a GEMM is a stream of its
// weights: cuBLAS reads them at 55-75% of the copy rate there (o_proj at about
// a third; docs/PERFORMANCE.md, "skinny"), which is most of one image's step.
// Here each output column is one weight row read once, front to back, by
// the warps its block gives it (K split between them when the columns alone
// would leave the last wave of warps ragged), 16-byte streaming loads with
// several in flight a lane; the input rows come through L1 (the weights are
// loaded past it); the warps' partial sums are added in a fixed order, so
// results repeat bitwise. All on `stream`, no allocation (capturable).
//
// Measured on the H200 (2026-12-03, docs/PERFORMANCE.md "Skinny decode
// GEMV"): it streams the weights at the same ~2.5-3.1 TB/s as cuBLAS, and one
// image's step was 0.85-0.97x cuBLAS's in the engine, so engine/cuda/gemm.h
// keeps cuBLAS by default and this kernel as an A/B option.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

namespace argen::kernels {

constexpr int kSkinnyLinearMaxRows = 4;

// 1 <= rows <= kSkinnyLinearMaxRows, in a positive multiple of 8, out >= 1,
// x and w 16-byte aligned, y 4-byte aligned.
bool SkinnyLinearSupported(const __nv_bfloat16* x, const __nv_bfloat16* w, int rows, int in, int out);

// The warps one output column gets (K split between them: 1, 2, 4 or 8) for
// `rows` x `in` -> `out` on the current device: the split whose warps fill
// the card's resident warps in the fullest waves, the fewest on a tie
// (exposed for the tests and the benchmark's report).
int SkinnyLinearSplit(int rows, int in, int out);

// Measures what SkinnyLinearSplit needs of the current device (the kernels'
// occupancy) now, so that no later call, e.g. one being captured into a CUDA
// graph, makes the query. Later calls do it themselves when this was not called.
void SkinnyLinearPrepare();

// cudaErrorInvalidValue when !SkinnyLinearSupported. beta is 0 (y = x W^T)
// or anything else (y = x W^T + beta y).
cudaError_t SkinnyLinearBf16(const __nv_bfloat16* x, const __nv_bfloat16* w, int rows, int in, int out, float* y,
                             float beta, cudaStream_t stream);

}  // namespace argen::kernels
