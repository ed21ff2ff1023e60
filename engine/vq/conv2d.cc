#include "engine/vq/conv2d.h"

#include <cblas.h>

#include <algorithm>
#include <cstring>

namespace argen::vq {
namespace {

// Columns for output rows [y0, y0 + rows) of a kxk conv with padding k/2:
// col[(c*k + ky)*k + kx][(y - y0)*w + x] = in[c][y + ky - p][x + kx - p] (0 outside).
void Im2ColBand(const float* in, int32_t c_begin, int32_t c_end, int32_t h, int32_t w, int32_t k, int32_t y0,
                int32_t rows, float* col) {
  const int32_t pad = k / 2;
  const size_t band = static_cast<size_t>(rows) * w;
  for (int32_t c = c_begin; c < c_end; ++c) {
    const float* plane = in + static_cast<size_t>(c) * h * w;
    for (int32_t ky = 0; ky < k; ++ky) {
      for (int32_t kx = 0; kx < k; ++kx) {
        float* dst = col + (static_cast<size_t>(c * k + ky) * k + kx) * band;
        const int32_t dx = kx - pad;
        // Output columns x whose source x + dx lies inside [0, w).
        const int32_t x_lo = std::max(0, -dx), x_hi = std::min(w, w - dx);
        for (int32_t r = 0; r < rows; ++r) {
          float* d = dst + static_cast<size_t>(r) * w;
          const int32_t sy = y0 + r + ky - pad;
          if (sy < 0 || sy >= h || x_lo >= x_hi) {
            std::memset(d, 0, sizeof(float) * w);
            continue;
          }
          const float* s = plane + static_cast<size_t>(sy) * w;
          if (x_lo > 0) std::memset(d, 0, sizeof(float) * x_lo);
          std::memcpy(d + x_lo, s + x_lo + dx, sizeof(float) * (x_hi - x_lo));
          if (x_hi < w) std::memset(d + x_hi, 0, sizeof(float) * (w - x_hi));
        }
      }
    }
  }
}

// out[:, n] = bias (or += bias when accumulating, so the GEMM can add on top with beta = 1).
void AddBias(const Conv2dWeights& conv, float* out, size_t hw, bool accumulate, int32_t o_begin, int32_t o_end) {
  for (int32_t o = o_begin; o < o_end; ++o) {
    float* row = out + static_cast<size_t>(o) * hw;
    const float b = conv.bias[o];
    if (accumulate) {
      for (size_t i = 0; i < hw; ++i) row[i] += b;
    } else {
      std::fill(row, row + hw, b);
    }
  }
}

int32_t BandRows(const Conv2dWeights& conv, int32_t h, int32_t w, size_t budget_floats) {
  const size_t per_row = static_cast<size_t>(conv.cin) * conv.kernel * conv.kernel * w;
  const size_t rows = std::max<size_t>(1, budget_floats / per_row);
  return static_cast<int32_t>(std::min<size_t>(rows, static_cast<size_t>(h)));
}

}  // namespace

size_t Conv2dScratchFloats(const Conv2dWeights& conv, int32_t h, int32_t w, size_t budget_floats) {
  if (conv.kernel == 1) return 0;
  return static_cast<size_t>(BandRows(conv, h, w, budget_floats)) * conv.cin * conv.kernel * conv.kernel * w;
}

void Conv2d(const Conv2dWeights& conv, const float* in, int32_t h, int32_t w, float* out, bool accumulate, float* col,
            size_t col_floats, parallel::ThreadPool* pool) {
  const size_t hw = static_cast<size_t>(h) * w;
  parallel::ParallelForRange(pool, conv.cout, [&](int64_t b, int64_t e) {
    AddBias(conv, out, hw, accumulate, static_cast<int32_t>(b), static_cast<int32_t>(e));
  });
  if (conv.kernel == 1) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, conv.cout, static_cast<int>(hw), conv.cin, 1.0f,
                conv.weight.data(), conv.cin, in, static_cast<int>(hw), 1.0f, out, static_cast<int>(hw));
    return;
  }
  const int32_t kdim = conv.cin * conv.kernel * conv.kernel;
  const int32_t band_rows = BandRows(conv, h, w, col_floats);
  for (int32_t y0 = 0; y0 < h; y0 += band_rows) {
    const int32_t rows = std::min(band_rows, h - y0);
    const int n = rows * w;
    parallel::ParallelForRange(pool, conv.cin, [&](int64_t b, int64_t e) {
      Im2ColBand(in, static_cast<int32_t>(b), static_cast<int32_t>(e), h, w, conv.kernel, y0, rows, col);
    });
    // out[:, y0*w : y0*w + n] += W[cout, kdim] * col[kdim, n]
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, conv.cout, n, kdim, 1.0f, conv.weight.data(), kdim, col, n,
                1.0f, out + static_cast<size_t>(y0) * w, static_cast<int>(hw));
  }
}

}  // namespace argen::vq
