#include "engine/cpu/prefill_attention.h"

#include <cmath>
#include <cstring>

namespace argen::cpu {
namespace {

// Eight partial sums so the compiler vectorizes the dot product without
// -ffast-math (one accumulator chain cannot be reordered).
inline float Dot(const float* a, const float* b, int32_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int32_t l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  }
  float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

}  // namespace

void PrefillAttention(const PrefillAttentionArgs& a) {
  const int32_t d = a.head_dim;
  const int32_t group = a.heads / a.kv_heads;
  float* p = a.scratch;
  for (int32_t h = 0; h < a.heads; ++h) {
    const float* kh = a.k + (h / group) * a.kv_positions * d;
    const float* vh = a.v + (h / group) * a.kv_positions * d;
    for (int32_t i = 0; i < a.len; ++i) {
      const float* q = a.q + i * a.q_stride + h * d;
      float max_logit = -INFINITY;
      for (int32_t j = 0; j <= i; ++j) {
        p[j] = Dot(q, kh + int64_t{j} * d, d) * a.scale;
        max_logit = p[j] > max_logit ? p[j] : max_logit;
      }
      float sum = 0.0f;
      for (int32_t j = 0; j <= i; ++j) {
        p[j] = std::exp(p[j] - max_logit);
        sum += p[j];
      }
      const float inv = 1.0f / sum;
      float* out = a.out + i * a.out_stride + h * d;
      std::memset(out, 0, sizeof(float) * d);
      for (int32_t j = 0; j <= i; ++j) {
        const float w = p[j] * inv;
        const float* vj = vh + int64_t{j} * d;
        for (int32_t c = 0; c < d; ++c) out[c] += w * vj[c];
      }
    }
  }
}

}  // namespace argen::cpu
