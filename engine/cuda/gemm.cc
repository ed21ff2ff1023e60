#include "engine/cuda/gemm.h"

#include "engine/cuda/cuda_status.h"

namespace argen::cuda {

absl::Status LinearBf16(cublasHandle_t handle, const __nv_bfloat16* x, const __nv_bfloat16* w, int rows, int in,
                        int out, float* y, float beta, const char* what) {
  if (rows <= 0) return absl::OkStatus();
  const float alpha = 1.0f;
  // Column-major view: y^T [out x rows] = W [in x out]^T * x^T [in x rows].
  return CublasStatus(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, out, rows, in, &alpha, w, CUDA_R_16BF, in, x,
                                   CUDA_R_16BF, in, &beta, y, CUDA_R_32F, out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                      what);
}

absl::Status Gemm::Init(cudaStream_t stream) {
  Reset();
  stream_ = stream;
  ARGEN_STATUS_RETURN(CublasStatus(cublasCreate(&cublas_), "create handle"));
  ARGEN_STATUS_RETURN(CublasStatus(cublasSetStream(cublas_, stream_), "set stream"));
  // A fixed workspace keeps cuBLAS from allocating during the step (and in capture).
  absl::StatusOr<DeviceBuffer> ws = DeviceBuffer::Allocate(kWorkspaceBytes, "cublas workspace");
  if (!ws.ok()) return ws.status();
  workspace_ = *std::move(ws);
  return CublasStatus(cublasSetWorkspace(cublas_, workspace_.as(), kWorkspaceBytes), "workspace");
}

void Gemm::Reset() {
  if (cublas_) cublasDestroy(cublas_);
  cublas_ = nullptr;
  workspace_ = DeviceBuffer();
}

}  // namespace argen::cuda
