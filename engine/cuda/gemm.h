// y[rows x out] (f32) = x[rows x in] (bf16) * W^T, W = [out x in] row-major
// (bf16, a torch Linear weight), with y = result + beta * y (beta = 1 fuses
// the residual add). fp32 accumulation, cublasGemmEx with CUBLAS_GEMM_DEFAULT
// on the handle's stream and one fixed workspace, so nothing is allocated
// during a step and calls are capturable in CUDA graphs.
//
// (A cuBLASLt path with heuristic and per-shape tuned algorithms measured no
// faster on the H200 at any 7B shape, bench/gpu/results/h200-2026-11-29-gemm,
// docs/PERFORMANCE.md, and nothing selected it; it was removed.)
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>

#include "absl/status/status.h"
#include "engine/cuda/device_buffer.h"

namespace argen::cuda {

// The cublasGemmEx call, on `handle`'s stream and workspace.
absl::Status LinearBf16(cublasHandle_t handle, const __nv_bfloat16* x, const __nv_bfloat16* w, int rows, int in,
                        int out, float* y, float beta, const char* what);

class Gemm {
 public:
  static constexpr size_t kWorkspaceBytes = size_t{32} << 20;

  Gemm() = default;
  ~Gemm() { Reset(); }
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // Creates the cuBLAS handle bound to `stream` and its fixed workspace.
  absl::Status Init(cudaStream_t stream);
  // Destroys the handle (the stream must be idle) and frees the workspace.
  void Reset();

  cublasHandle_t cublas() const { return cublas_; }

  absl::Status Linear(const __nv_bfloat16* x, const __nv_bfloat16* w, int rows, int in, int out, float* y, float beta,
                      const char* what) {
    return LinearBf16(cublas_, x, w, rows, in, out, y, beta, what);
  }

 private:
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  DeviceBuffer workspace_;
};

}  // namespace argen::cuda
