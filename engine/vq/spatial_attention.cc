#include "engine/vq/spatial_attention.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

namespace argen::vq {

void SpatialAttention(const float* q, const float* k, const float* v, int32_t c, int32_t n, float* scores, float* out,
                      parallel::ThreadPool* pool) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(c));
  // scores[i, j] = scale * sum_c q[c, i] k[c, j]
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, n, c, scale, q, n, k, n, 0.0f, scores, n);
  parallel::ParallelForRange(pool, n, [&](int64_t rb, int64_t re) {
    for (int64_t i = rb; i < re; ++i) {
      float* row = scores + static_cast<size_t>(i) * n;
      const float mx = *std::max_element(row, row + n);
      double sum = 0.0;
      for (int32_t j = 0; j < n; ++j) {
        row[j] = std::exp(row[j] - mx);
        sum += row[j];
      }
      const float inv = static_cast<float>(1.0 / sum);
      for (int32_t j = 0; j < n; ++j) row[j] *= inv;
    }
  });
  // out[c, i] = sum_j v[c, j] scores[i, j]
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, c, n, n, 1.0f, v, n, scores, n, 0.0f, out, n);
}

}  // namespace argen::vq
