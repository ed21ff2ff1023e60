#include "engine/vq_cuda/fp32_vq_ops.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_status.h"
#include "kernels/vq_kernels.h"

namespace argen::vq {

using cuda::CublasStatus;
using cuda::CudaStatus;

absl::Status Fp32Conv2d(const Fp32VqContext& ctx, const Fp32ConvParams& c, const float* in, int32_t n, int32_t h,
                        int32_t w, float* out, bool accumulate, const char* what) {
  const int64_t m = static_cast<int64_t>(n) * h * w;
  ARGEN_STATUS_RETURN(CudaStatus(kernels::VqBiasRows(out, c.bias, c.cout, m, accumulate, ctx.stream), what));
  const float one = 1.0f;
  // Column-major view of the row-major [C][m] matrices: out^T [m x cout] = col^T [m x K] * W^T [K x cout].
  if (c.kernel == 1) {
    return CublasStatus(cublasSgemm(ctx.cublas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(m), c.cout, c.cin, &one, in,
                                    static_cast<int>(m), c.weight, c.cin, &one, out, static_cast<int>(m)),
                        what);
  }
  const int64_t kdim = static_cast<int64_t>(c.cin) * 9;
  const int64_t band = std::min<int64_t>(m, static_cast<int64_t>(ctx.col_floats) / kdim);
  if (band < 1) {
    return absl::InternalError(
        absl::StrCat(what, ": im2col band of ", ctx.col_floats, " floats holds no column of ", kdim));
  }
  for (int64_t p0 = 0; p0 < m; p0 += band) {
    const int64_t len = std::min(band, m - p0);
    ARGEN_STATUS_RETURN(CudaStatus(kernels::VqIm2Col3x3(in, c.cin, n, h, w, p0, len, ctx.col, ctx.stream), what));
    ARGEN_STATUS_RETURN(CublasStatus(cublasSgemm(ctx.cublas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(len), c.cout,
                                                 static_cast<int>(kdim), &one, ctx.col, static_cast<int>(len), c.weight,
                                                 static_cast<int>(kdim), &one, out + p0, static_cast<int>(m)),
                                     what));
  }
  return absl::OkStatus();
}

absl::Status Fp32SpatialAttention(const Fp32VqContext& ctx, const float* q, const float* k, const float* v, int32_t c,
                                  int32_t n, int64_t hw, float* scores, float* out) {
  const int64_t m = hw * n;
  const float scale = 1.0f / std::sqrt(static_cast<float>(c));
  const float one = 1.0f, zero = 0.0f;
  const int ihw = static_cast<int>(hw), im = static_cast<int>(m);
  // Per image: scores[i][j] = scale * sum_c q[c][i] k[c][j] (row-major [hw][hw]);
  // column-major that is S^T [hw x hw] = K^T-view [hw x c] * (Q-view [hw x c])^T.
  ARGEN_STATUS_RETURN(CublasStatus(cublasSgemmStridedBatched(ctx.cublas, CUBLAS_OP_N, CUBLAS_OP_T, ihw, ihw, c, &scale,
                                                             k, im, hw, q, im, hw, &zero, scores, ihw, hw * hw, n),
                                   "attn scores"));
  ARGEN_STATUS_RETURN(CudaStatus(kernels::VqSoftmaxRows(scores, m, ihw, ctx.stream), "attn softmax"));
  // out[c][i] = sum_j v[c][j] P[i][j]: column-major out-view [hw x c] = P [hw x hw] * V-view [hw x c].
  return CublasStatus(cublasSgemmStridedBatched(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, ihw, c, ihw, &one, scores, ihw,
                                                hw * hw, v, im, hw, &zero, out, im, hw, n),
                      "attn values");
}

}  // namespace argen::vq
