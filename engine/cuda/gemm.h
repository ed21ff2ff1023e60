// y[rows x out] (f32) = x[rows x in] (bf16) * W^T, W = [out x in] row-major
// (bf16, a torch Linear weight), with y = result + beta * y (beta = 1 fuses
// the residual add). fp32 accumulation.
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>

#include "absl/status/status.h"

namespace argen::cuda {

absl::Status LinearBf16(cublasHandle_t handle, const __nv_bfloat16* x, const __nv_bfloat16* w,
                        int rows, int in, int out, float* y, float beta, const char* what);

}  // namespace argen::cuda
