#include "engine/cpu/gemm.h"

#include <cblas-openblas.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

namespace argen::cpu {
namespace {

std::atomic<int32_t> row_tile{0};

void Sgemm(const float* x, const float* w, int64_t rows, int32_t in, int32_t out, float* y, float beta) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), out, in, 1.0f, x, in, w, in, beta, y,
              out);
}

}  // namespace

void MatMulWT(const float* x, const float* w, int64_t rows, int32_t in, int32_t out, float* y, float beta) {
  if (rows == 0) return;
  const int32_t tile = row_tile.load(std::memory_order_relaxed);
  if (tile <= 0) {
    Sgemm(x, w, rows, in, out, y, beta);
    return;
  }
  // Every row through a GEMM of exactly `tile` rows: OpenBLAS picks its
  // kernel by the product's shape, so with a tile of 1 a row's result no
  // longer depends on the batch (larger tiles: see gemm.h).
  thread_local std::vector<float> x_tile, y_tile;
  x_tile.resize(static_cast<size_t>(tile) * in);
  y_tile.resize(static_cast<size_t>(tile) * out);
  for (int64_t r = 0; r < rows; r += tile) {
    const int64_t n = std::min<int64_t>(tile, rows - r);
    std::fill(x_tile.begin(), x_tile.end(), 0.0f);
    std::memcpy(x_tile.data(), x + r * in, sizeof(float) * n * in);
    if (beta != 0.0f) {
      std::fill(y_tile.begin(), y_tile.end(), 0.0f);
      std::memcpy(y_tile.data(), y + r * out, sizeof(float) * n * out);
    }
    Sgemm(x_tile.data(), w, tile, in, out, y_tile.data(), beta);
    std::memcpy(y + r * out, y_tile.data(), sizeof(float) * n * out);
  }
}

void SetGemmRowTile(int32_t rows) { row_tile.store(std::max(rows, 0), std::memory_order_relaxed); }

void SetBlasThreads(int32_t threads) {
  if (threads > 0) openblas_set_num_threads(threads);
}

}  // namespace argen::cpu
