#include "engine/cpu/prefill_attention.h"

#include <cmath>
#include <cstring>

#include "engine/cpu/dot.h"

namespace argen::cpu {

void PrefillAttention(const PrefillAttentionArgs& a) {
  const int32_t d = a.head_dim;
  const int32_t group = a.heads / a.kv_heads;
  float* p = a.scratch;
  for (int32_t h = 0; h < a.heads; ++h) {
    const float* kh = a.k + (h / group) * a.kv_positions * d;
    const float* vh = a.v + (h / group) * a.kv_positions * d;
    for (int32_t i = 0; i < a.len; ++i) {
      const float* q = a.q + i * a.q_stride + h * d;
      const int32_t last = a.first + i;  // the query's position: it attends 0..last
      float max_logit = -INFINITY;
      for (int32_t j = 0; j <= last; ++j) {
        p[j] = Dot(q, kh + int64_t{j} * d, d) * a.scale;
        max_logit = p[j] > max_logit ? p[j] : max_logit;
      }
      float sum = 0.0f;
      for (int32_t j = 0; j <= last; ++j) {
        p[j] = std::exp(p[j] - max_logit);
        sum += p[j];
      }
      const float inv = 1.0f / sum;
      float* out = a.out + i * a.out_stride + h * d;
      std::memset(out, 0, sizeof(float) * d);
      for (int32_t j = 0; j <= last; ++j) {
        const float w = p[j] * inv;
        const float* vj = vh + int64_t{j} * d;
        for (int32_t c = 0; c < d; ++c) out[c] += w * vj[c];
      }
    }
  }
}

}  // namespace argen::cpu
