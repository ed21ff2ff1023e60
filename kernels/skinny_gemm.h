// y[rows x out] (f32) = x[rows x in] (bf16) * W^T + beta * y, W = [out x in]
// row-major bf16 (a torch Linear weight), for the few rows of a decode step
// (rows <= kSkinnyMaxRows): the step is then bound by reading W once, so each
// CTA streams a 64-column slab of W through a 5-stage cp.async pipeline in
// shared memory (64 keys a stage, XOR-swizzled so fragment reads are
// conflict-free) into mma.sync B fragments, and takes x's fragments through
// L1. Keys of one 32-wide chunk are read by lane (n, t) as k = 8t..8t+7 and fed
// to two m16n8k16 MMAs under one permutation of k shared by x and W (a dot
// product does not depend on the order of its terms). Long K is split over
// `splits` CTAs whose partial sums land in a workspace and are added (with
// beta * y) by a second kernel, so every output is written once, in a fixed
// order: results do not depend on timing.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace argen::kernels {

inline constexpr int32_t kSkinnyMaxRows = 32;
// Output columns one CTA makes (4 warps x 2 n-tiles of 8) and keys per pipeline stage.
inline constexpr int32_t kSkinnyBlockCols = 64;
inline constexpr int32_t kSkinnyStageKeys = 64;

struct SkinnyGemmArgs {
  const __nv_bfloat16* x = nullptr;  // [rows][in], 16-byte aligned
  const __nv_bfloat16* w = nullptr;  // [out][in], 16-byte aligned
  float* y = nullptr;                // [rows][out]
  int32_t rows = 0, in = 0, out = 0;
  float beta = 0.f;
  int32_t splits = 1;         // K slices (ChooseSkinnySplits)
  float* partials = nullptr;  // [splits][rows][out] when splits > 1 (SkinnyWorkspaceBytes)
};

// 1 <= rows <= kSkinnyMaxRows, in % kSkinnyStageKeys == 0, out % 8 == 0.
bool SkinnyGemmSupported(int32_t rows, int32_t in, int32_t out);

// K slices so that about two CTAs per SM run, each slice at least four stages,
// and the partials fit `max_workspace_bytes`.
int32_t ChooseSkinnySplits(int32_t rows, int32_t in, int32_t out, int32_t sm_count, size_t max_workspace_bytes);

size_t SkinnyWorkspaceBytes(int32_t rows, int32_t out, int32_t splits);

// cudaErrorInvalidValue for an unsupported shape, splits < 1, or splits > 1
// without partials.
cudaError_t SkinnyGemm(const SkinnyGemmArgs& args, cudaStream_t stream);

}  // namespace argen::kernels
