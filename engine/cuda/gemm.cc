#include "engine/cuda/gemm.h"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_status.h"
#include "kernels/skinny_gemm.h"

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
  ARGEN_STATUS_RETURN(CublasStatus(cublasSetWorkspace(cublas_, workspace_.as(), kWorkspaceBytes), "workspace"));
  absl::StatusOr<DeviceBuffer> skinny = DeviceBuffer::Allocate(kSkinnyWorkspaceBytes, "skinny gemm workspace");
  if (!skinny.ok()) return skinny.status();
  skinny_workspace_ = *std::move(skinny);
  // Benchmarks and tests pick the kernel for a whole process (docs/operations.md).
  if (const char* env = std::getenv("ARGEN_CUDA_GEMM"); env != nullptr) {
    const std::string_view v(env);
    if (v == "cublas")
      choice_ = GemmChoice::kCublas;
    else if (v == "skinny")
      choice_ = GemmChoice::kSkinny;
    else
      return absl::InvalidArgumentError(absl::StrCat("ARGEN_CUDA_GEMM must be cublas or skinny, got '", std::string(v), "'"));
  }
  int device = 0;
  ARGEN_CUDA_RETURN(cudaGetDevice(&device), "device");
  ARGEN_CUDA_RETURN(cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device), "sm count");
  return absl::OkStatus();
}

bool Gemm::UsesSkinny(const __nv_bfloat16* x, const __nv_bfloat16* w, int rows, int in, int out,
                      const float* y) const {
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  return choice_ == GemmChoice::kSkinny && kernels::SkinnyGemmSupported(rows, in, out) && aligned(x) && aligned(w) &&
         aligned(y);
}

absl::Status Gemm::Linear(const __nv_bfloat16* x, const __nv_bfloat16* w, int rows, int in, int out, float* y,
                          float beta, const char* what) {
  if (rows <= 0) return absl::OkStatus();
  if (!UsesSkinny(x, w, rows, in, out, y)) return LinearBf16(cublas_, x, w, rows, in, out, y, beta, what);
  kernels::SkinnyGemmArgs a;
  a.x = x;
  a.w = w;
  a.y = y;
  a.rows = rows;
  a.in = in;
  a.out = out;
  a.beta = beta;
  a.splits = kernels::ChooseSkinnySplits(rows, in, out, sm_count_, kSkinnyWorkspaceBytes);
  a.partials = skinny_workspace_.as<float>();
  ARGEN_CUDA_RETURN(kernels::SkinnyGemm(a, stream_), what);
  return absl::OkStatus();
}

void Gemm::Reset() {
  if (cublas_) cublasDestroy(cublas_);
  cublas_ = nullptr;
  workspace_ = DeviceBuffer();
  skinny_workspace_ = DeviceBuffer();
}

}  // namespace argen::cuda
