#include "engine/cuda/gemm.h"

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_status.h"
#include "kernels/fp8_linear.h"
#include "kernels/skinny_linear.h"

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

absl::Status Gemm::Linear(const __nv_bfloat16* x, const __nv_bfloat16* w, int rows, int in, int out, float* y,
                          float beta, const char* what) {
  if (skinny_ && kernels::SkinnyLinearSupported(x, w, rows, in, out)) {
    ARGEN_CUDA_RETURN(kernels::SkinnyLinearBf16(x, w, rows, in, out, y, beta, stream_), what);
    return absl::OkStatus();
  }
  return LinearBf16(cublas_, x, w, rows, in, out, y, beta, what);
}

void Gemm::set_skinny(bool on) {
  skinny_ = on;
  if (on) kernels::SkinnyLinearPrepare();  // its occupancy queries now, not in a step being captured
}

absl::Status Gemm::Init(cudaStream_t stream) {
  Reset();
  stream_ = stream;
  ARGEN_STATUS_RETURN(CublasStatus(cublasCreate(&cublas_), "create handle"));
  ARGEN_STATUS_RETURN(CublasStatus(cublasSetStream(cublas_, stream_), "set stream"));
  ARGEN_STATUS_RETURN(CublasStatus(cublasLtCreate(&lt_), "create cublasLt handle"));
  // A fixed workspace keeps cuBLAS from allocating during the step (and in
  // capture); both handles use it, one call at a time on the one stream.
  absl::StatusOr<DeviceBuffer> ws = DeviceBuffer::Allocate(kWorkspaceBytes, "cublas workspace");
  if (!ws.ok()) return ws.status();
  workspace_ = *std::move(ws);
  return CublasStatus(cublasSetWorkspace(cublas_, workspace_.as(), kWorkspaceBytes), "workspace");
}

void Gemm::Reset() {
  for (auto& [key, p] : plans_) {
    cublasLtMatrixLayoutDestroy(p.a);
    cublasLtMatrixLayoutDestroy(p.b);
    cublasLtMatrixLayoutDestroy(p.c);
    cublasLtMatmulDescDestroy(p.desc);
  }
  plans_.clear();
  if (lt_) cublasLtDestroy(lt_);
  lt_ = nullptr;
  if (cublas_) cublasDestroy(cublas_);
  cublas_ = nullptr;
  workspace_ = DeviceBuffer();
  fp8_codes_ = DeviceBuffer();
  fp8_scales_ = DeviceBuffer();
  fp8_rows_ = 0;
  fp8_in_ = 0;
}

absl::Status Gemm::ReserveFp8Inputs(int64_t rows, int32_t in) {
  if (rows <= fp8_rows_ && in <= fp8_in_) return absl::OkStatus();
  absl::StatusOr<DeviceBuffer> codes = DeviceBuffer::Allocate(rows * in, "fp8 GEMM inputs");
  if (!codes.ok()) return codes.status();
  absl::StatusOr<DeviceBuffer> scales = DeviceBuffer::Allocate(rows * 4 + 512, "fp8 GEMM input scales");
  if (!scales.ok()) return scales.status();
  fp8_codes_ = *std::move(codes);
  fp8_scales_ = *std::move(scales);
  fp8_rows_ = rows;
  fp8_in_ = in;
  return absl::OkStatus();
}

absl::Status Gemm::PlanFor(int out, int rows, int in, bool accumulate, const float* w_scales, const float* x_scales,
                           const char* what, const LtPlan** plan) {
  const auto key = std::make_tuple(out, rows, in, accumulate);
  if (auto it = plans_.find(key); it != plans_.end()) {
    *plan = &it->second;
    return absl::OkStatus();
  }
  LtPlan p;
  auto status = [&](cublasStatus_t s, const char* step) {
    return CublasStatus(s, absl::StrCat(what, ": fp8 GEMM ", step, " (", out, " x ", in, ", ", rows, " rows)"));
  };
  auto fail = [&](absl::Status s) {
    if (p.a) cublasLtMatrixLayoutDestroy(p.a);
    if (p.b) cublasLtMatrixLayoutDestroy(p.b);
    if (p.c) cublasLtMatrixLayoutDestroy(p.c);
    if (p.desc) cublasLtMatmulDescDestroy(p.desc);
    return s;
  };
#define ARGEN_LT(expr, step)                                                 \
  do {                                                                       \
    if (absl::Status s_ = status((expr), (step)); !s_.ok()) return fail(s_); \
  } while (0)
  ARGEN_LT(cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "descriptor");
  // Column-major view as LinearBf16: y^T [out x rows] = W^T' * x^T, the "TN"
  // layout the fp8 tensor cores require.
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  ARGEN_LT(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a)), "transa");
  ARGEN_LT(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b)), "transb");
  const int32_t outer = CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
  ARGEN_LT(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &outer, sizeof(outer)),
           "weight scale mode");
  ARGEN_LT(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &outer, sizeof(outer)),
           "input scale mode");
  // cuBLASLt refuses the outer-vector modes (CUBLAS_STATUS_INVALID_VALUE)
  // unless the scale vectors are set when the algorithm is chosen; every
  // call sets its own before its matmul.
  ARGEN_LT(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scales, sizeof(w_scales)),
           "weight scales");
  ARGEN_LT(cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scales, sizeof(x_scales)),
           "input scales");
  ARGEN_LT(cublasLtMatrixLayoutCreate(&p.a, CUDA_R_8F_E4M3, in, out, in), "weight layout");
  ARGEN_LT(cublasLtMatrixLayoutCreate(&p.b, CUDA_R_8F_E4M3, in, rows, in), "input layout");
  ARGEN_LT(cublasLtMatrixLayoutCreate(&p.c, CUDA_R_32F, out, rows, out), "output layout");
  cublasLtMatmulPreference_t pref = nullptr;
  ARGEN_LT(cublasLtMatmulPreferenceCreate(&pref), "preference");
  const size_t ws = kWorkspaceBytes;
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  cublasStatus_t hs =
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  if (hs == CUBLAS_STATUS_SUCCESS)
    hs = cublasLtMatmulAlgoGetHeuristic(lt_, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  ARGEN_LT(hs, "heuristic");
  if (found == 0) {
    return fail(absl::UnimplementedError(
        absl::StrCat(what, ": cuBLASLt has no fp8 (e4m3, per-channel x per-row scales) algorithm for ", out, " x ", in,
                     " at ", rows, " rows on this GPU (weight_dtype fp8 needs Hopper or newer and cuBLAS 12.9+)")));
  }
#undef ARGEN_LT
  p.algo = result.algo;
  auto [it, inserted] = plans_.emplace(key, p);
  *plan = &it->second;
  return absl::OkStatus();
}

absl::Status Gemm::LinearFp8(const __nv_bfloat16* x, const uint8_t* w_codes, const float* w_scales, int rows, int in,
                             int out, float* y, float beta, const char* what) {
  if (rows <= 0) return absl::OkStatus();
  if (rows > fp8_rows_ || in > fp8_in_) {
    return absl::InternalError(absl::StrCat(what, ": fp8 GEMM of ", rows, " rows x ", in,
                                            " beyond the reserved inputs (", fp8_rows_, " x ", fp8_in_, ")"));
  }
  uint8_t* codes = fp8_codes_.as<uint8_t>();
  float* scales = fp8_scales_.as<float>();
  ARGEN_CUDA_RETURN(kernels::QuantizeRowsE4m3(x, rows, in, codes, scales, stream_), what);
  const LtPlan* p = nullptr;
  ARGEN_STATUS_RETURN(PlanFor(out, rows, in, beta != 0.f, w_scales, scales, what, &p));
  ARGEN_STATUS_RETURN(CublasStatus(
      cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &w_scales, sizeof(w_scales)),
      what));
  const float* x_scales = scales;
  ARGEN_STATUS_RETURN(CublasStatus(
      cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &x_scales, sizeof(x_scales)),
      what));
  const float alpha = 1.0f;
  return CublasStatus(cublasLtMatmul(lt_, p->desc, &alpha, w_codes, p->a, codes, p->b, &beta, y, p->c, y, p->c,
                                     &p->algo, workspace_.as(), kWorkspaceBytes, stream_),
                      what);
}

}  // namespace argen::cuda
