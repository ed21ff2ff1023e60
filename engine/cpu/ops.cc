#include "engine/cpu/ops.h"

#include <cmath>
#include <cstring>

#include "common/bf16.h"
#include "kernels/kv_fp8.h"

namespace argen::cpu {

void RmsNorm(const float* x, const float* weight, int64_t rows, int32_t dim, float eps, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* outr = out + r * dim;
    double sum_sq = 0.0;
    for (int32_t i = 0; i < dim; ++i) sum_sq += static_cast<double>(xr[i]) * xr[i];
    const float scale = 1.0f / std::sqrt(static_cast<float>(sum_sq / dim) + eps);
    for (int32_t i = 0; i < dim; ++i) outr[i] = weight[i] * (xr[i] * scale);
  }
}

void LayerNorm(const float* x, const float* weight, const float* bias, int64_t rows, int32_t dim, float eps,
               float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* outr = out + r * dim;
    double sum = 0.0;
    for (int32_t i = 0; i < dim; ++i) sum += xr[i];
    const double mean = sum / dim;
    double sum_sq = 0.0;
    for (int32_t i = 0; i < dim; ++i) sum_sq += (xr[i] - mean) * (xr[i] - mean);
    const float m = static_cast<float>(mean);
    const float scale = 1.0f / std::sqrt(static_cast<float>(sum_sq / dim) + eps);
    for (int32_t i = 0; i < dim; ++i) outr[i] = (xr[i] - m) * scale * weight[i] + bias[i];
  }
}

void Norm(const float* x, const float* weight, const float* bias, int64_t rows, int32_t dim, float eps, float* out) {
  if (bias == nullptr) {
    RmsNorm(x, weight, rows, dim, eps, out);
  } else {
    LayerNorm(x, weight, bias, rows, dim, eps, out);
  }
}

void HeadLayerNorm(float* x, int64_t rows, int64_t stride, int32_t heads, int32_t head_dim, const float* weight,
                   const float* bias, float eps) {
  for (int64_t r = 0; r < rows; ++r) {
    for (int32_t h = 0; h < heads; ++h) {
      float* v = x + r * stride + int64_t{h} * head_dim;
      LayerNorm(v, weight + int64_t{h} * head_dim, bias + int64_t{h} * head_dim, 1, head_dim, eps, v);
    }
  }
}

void AddNorm(const float* y, const float* weight, const float* bias, int64_t rows, int32_t dim, float eps, float* x,
             float* scratch) {
  Norm(y, weight, bias, rows, dim, eps, scratch);
  for (int64_t i = 0; i < rows * dim; ++i) x[i] += scratch[i];
}

void SiluMul(const float* gate_up, int64_t rows, int32_t inter, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* gate = gate_up + r * 2 * inter;
    const float* up = gate + inter;
    float* outr = out + r * inter;
    for (int32_t i = 0; i < inter; ++i) {
      const float g = gate[i];
      outr[i] = g / (1.0f + std::exp(-g)) * up[i];
    }
  }
}

void GeluInPlace(float* x, int64_t n) {
  constexpr float kInvSqrt2 = 0.70710678118654752f;
  for (int64_t i = 0; i < n; ++i) x[i] = 0.5f * x[i] * (1.0f + std::erf(x[i] * kInvSqrt2));
}

void AddBias(float* x, const float* bias, int64_t rows, int32_t dim) {
  for (int64_t r = 0; r < rows; ++r) {
    float* xr = x + r * dim;
    for (int32_t i = 0; i < dim; ++i) xr[i] += bias[i];
  }
}

void RopeAngles(const float* inv_freq, int32_t half_dim, int32_t position, float* cos_sin) {
  for (int32_t i = 0; i < half_dim; ++i) {
    // Same rounding as HF: the angle is formed in f32 (position * inv_freq).
    const float angle = static_cast<float>(position) * inv_freq[i];
    cos_sin[i] = std::cos(angle);
    cos_sin[half_dim + i] = std::sin(angle);
  }
}

void ApplyRope(float* x, int32_t n_heads, int32_t head_dim, const float* cos_sin) {
  const int32_t half = head_dim / 2;
  const float* cos_a = cos_sin;
  const float* sin_a = cos_sin + half;
  for (int32_t h = 0; h < n_heads; ++h) {
    float* xh = x + static_cast<int64_t>(h) * head_dim;
    for (int32_t i = 0; i < half; ++i) {
      const float a = xh[i], b = xh[half + i];
      xh[i] = a * cos_a[i] - b * sin_a[i];
      xh[half + i] = b * cos_a[i] + a * sin_a[i];
    }
  }
}

void RopeAnglesGrid2d(const float* inv_freq, int32_t quarter, int32_t row, int32_t col, float* cos_sin) {
  const int32_t half = 2 * quarter;
  for (int32_t i = 0; i < quarter; ++i) {
    // f32 angles, as the reference's torch.outer(arange(grid), freqs).
    const float row_angle = static_cast<float>(row) * inv_freq[i];
    const float col_angle = static_cast<float>(col) * inv_freq[i];
    cos_sin[i] = std::cos(row_angle);
    cos_sin[half + i] = std::sin(row_angle);
    cos_sin[quarter + i] = std::cos(col_angle);
    cos_sin[half + quarter + i] = std::sin(col_angle);
  }
}

void ApplyRopeInterleaved(float* x, int32_t n_heads, int32_t head_dim, const float* cos_sin) {
  const int32_t half = head_dim / 2;
  const float* cos_a = cos_sin;
  const float* sin_a = cos_sin + half;
  for (int32_t h = 0; h < n_heads; ++h) {
    float* xh = x + static_cast<int64_t>(h) * head_dim;
    for (int32_t i = 0; i < half; ++i) {
      const float a = xh[2 * i], b = xh[2 * i + 1];
      xh[2 * i] = a * cos_a[i] - b * sin_a[i];
      xh[2 * i + 1] = b * cos_a[i] + a * sin_a[i];
    }
  }
}

void RoundRowsThroughE4m3(const float* x, int64_t rows, int32_t cols, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    float* o = out + r * cols;
    const float* in = x + r * cols;
    for (int32_t i = 0; i < cols; ++i) o[i] = RoundToBf16(in[i]);  // as the CUDA backend's inputs
    kernels::RoundThroughE4m3(o, cols);
  }
}

}  // namespace argen::cpu
