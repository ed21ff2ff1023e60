#include "engine/cpu/gemm.h"

#include <cblas-openblas.h>

#include <atomic>

namespace argen::cpu {
namespace {

std::atomic<bool> row_invariant{false};

void Sgemm(const float* x, const float* w, int64_t rows, int32_t in, int32_t out, float* y, float beta) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), out, in, 1.0f, x, in, w, in, beta, y,
              out);
}

}  // namespace

void MatMulWT(const float* x, const float* w, int64_t rows, int32_t in, int32_t out, float* y, float beta) {
  if (rows == 0) return;
  if (!row_invariant.load(std::memory_order_relaxed)) {
    Sgemm(x, w, rows, in, out, y, beta);
    return;
  }
  // Every row through a GEMM of one row: OpenBLAS picks its kernel by the
  // product's shape, so a row's result no longer depends on the batch.
  for (int64_t r = 0; r < rows; ++r) Sgemm(x + r * in, w, 1, in, out, y + r * out, beta);
}

void SetRowInvariantGemms(bool on) { row_invariant.store(on, std::memory_order_relaxed); }

void SetBlasThreads(int32_t threads) {
  if (threads > 0) openblas_set_num_threads(threads);
}

}  // namespace argen::cpu
