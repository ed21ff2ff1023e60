// y[rows x out] (f32) = x[rows x in] (bf16) * W^T, W = [out x in] row-major
// (a torch Linear weight), with y = result + beta * y (beta = 1 fuses the
// residual add). fp32 accumulation on the handle's stream and one fixed
// workspace, so nothing is allocated during a step and calls are capturable
// in CUDA graphs.
//
// W is bf16 (cublasGemmEx, CUBLAS_GEMM_DEFAULT) or, for weight_dtype "fp8",
// e4m3 codes with a scale per output channel (kernels/fp8_linear.h): x is then
// quantized per row into a fixed scratch and the product runs on the fp8
// tensor cores through cuBLASLt with both scale vectors applied in its
// epilogue (CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F).
//
// At 1-4 rows (one or two images) a bf16 product is a stream of its weights;
// set_skinny(true) runs kernels/skinny_linear.h's kernel there instead of
// cuBLAS. Off by default: on the H200 it was 0.85-0.97x cuBLAS's step in the
// engine (docs/PERFORMANCE.md, "Skinny decode GEMV"); kept for the A/B.
//
// (A cuBLASLt path for bf16 with heuristic and per-shape tuned algorithms
// measured no faster on the H200 at any 7B shape, bench/gpu/results/h200-2026-11-29-gemm,
// docs/PERFORMANCE.md, and nothing selected it; it was removed.)
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <tuple>

#include "absl/status/status.h"
#include "engine/cuda/device_buffer.h"

namespace argen::cuda {

// A Linear's weight on the device in one of the two formats.
struct LinearWeight {
  const __nv_bfloat16* bf16 = nullptr;  // weight_dtype auto
  const uint8_t* fp8 = nullptr;         // weight_dtype fp8: e4m3 codes [out x in]
  const float* fp8_scales = nullptr;    // and one scale per output channel
};

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

  // Creates the cuBLAS and cuBLASLt handles bound to `stream` and the fixed workspace.
  absl::Status Init(cudaStream_t stream);
  // Destroys the handles and plans (the stream must be idle) and frees the buffers.
  void Reset();

  // The scratch of fp8 GEMM inputs: up to `rows` rows of up to `in` columns
  // (Fp8ScratchBytes). Needed before any Linear with fp8 weights.
  absl::Status ReserveFp8Inputs(int64_t rows, int32_t in);
  static int64_t Fp8ScratchBytes(int64_t rows, int32_t in) { return rows * in + rows * 4 + 512; }

  cublasHandle_t cublas() const { return cublas_; }

  absl::Status Linear(const __nv_bfloat16* x, const __nv_bfloat16* w, int rows, int in, int out, float* y, float beta,
                      const char* what);
  absl::Status Linear(const __nv_bfloat16* x, const LinearWeight& w, int rows, int in, int out, float* y, float beta,
                      const char* what) {
    if (w.fp8 != nullptr) return LinearFp8(x, w.fp8, w.fp8_scales, rows, in, out, y, beta, what);
    return Linear(x, w.bf16, rows, in, out, y, beta, what);
  }
  // Whether bf16 products of few rows take the skinny kernel or cuBLAS (default).
  void set_skinny(bool on);
  bool skinny() const { return skinny_; }
  // x quantized per row (kernels::QuantizeRowsE4m3), then the fp8 product.
  absl::Status LinearFp8(const __nv_bfloat16* x, const uint8_t* w_codes, const float* w_scales, int rows, int in,
                         int out, float* y, float beta, const char* what);

 private:
  // The cuBLASLt descriptors and the algorithm of one (out, rows, in, beta) shape.
  struct LtPlan {
    cublasLtMatmulDesc_t desc = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulAlgo_t algo{};
  };
  absl::Status PlanFor(int out, int rows, int in, bool accumulate, const float* w_scales, const float* x_scales,
                       const char* what, const LtPlan** plan);

  cudaStream_t stream_ = nullptr;
  bool skinny_ = false;
  cublasHandle_t cublas_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  DeviceBuffer workspace_;
  DeviceBuffer fp8_codes_, fp8_scales_;
  int64_t fp8_rows_ = 0;
  int32_t fp8_in_ = 0;
  std::map<std::tuple<int, int, int, bool>, LtPlan> plans_;
};

}  // namespace argen::cuda
