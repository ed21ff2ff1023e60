#include "engine/cpu/gemm.h"

#include <cblas-openblas.h>

namespace argen::cpu {

void MatMulWT(const float* x, const float* w, int64_t rows, int32_t in, int32_t out, float* y, float beta) {
  if (rows == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), out, in, 1.0f, x, in, w, in, beta, y,
              out);
}

void SetBlasThreads(int32_t threads) {
  if (threads > 0) openblas_set_num_threads(threads);
}

}  // namespace argen::cpu
