#include "engine/cuda/gemm.h"

#include "engine/cuda/cuda_status.h"

namespace argen::cuda {

absl::Status LinearBf16(cublasHandle_t handle, const __nv_bfloat16* x, const __nv_bfloat16* w,
                        int rows, int in, int out, float* y, float beta, const char* what) {
  if (rows <= 0) return absl::OkStatus();
  const float alpha = 1.0f;
  // Column-major view: y^T [out x rows] = W [in x out]^T * x^T [in x rows].
  return CublasStatus(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, &alpha, w,
                                   CUDA_R_16BF, in, x, CUDA_R_16BF, in, &beta, y, CUDA_R_32F, out,
                                   CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                      what);
}

}  // namespace argen::cuda
