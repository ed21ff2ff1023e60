#include "engine/cpu/sparse_attention.h"

#include <cmath>
#include <cstring>

#include "engine/cpu/dot.h"

namespace argen::cpu {
namespace {

// Gathered rows defeat the hardware prefetcher at each jump; ask for the row
// a few keys ahead (head_dim floats, one cache line at a time).
constexpr int32_t kPrefetchAhead = 4;
inline void PrefetchRow(const float* row, int32_t n) {
  for (int32_t i = 0; i < n; i += 16) __builtin_prefetch(row + i);
}

inline void Axpy(float alpha, const float* x, float* y, int32_t n) {
  for (int32_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}

}  // namespace

int64_t DecodeAttentionScratchFloats(const DecodeAttentionShape& shape, int32_t attended_stride) {
  return static_cast<int64_t>(shape.prompt_len) + attended_stride;
}

void DecodeAttention(const DecodeAttentionShape& shape, const DecodeAttentionIo& io) {
  const int32_t d = shape.head_dim;
  const int32_t lp = shape.prompt_len;
  const int32_t group = shape.heads / shape.kv_heads;
  const bool own_prompt = io.prompt_k == nullptr;
  const int32_t stored_prompt = own_prompt ? lp : 0;
  const int64_t head_stride = static_cast<int64_t>(stored_prompt + shape.n_slots) * d;
  const int64_t prompt_stride = own_prompt ? head_stride : io.prompt_head_stride;
  const int32_t full_stride = lp + io.attended_stride;
  float* logits = io.scratch;

  for (int32_t g = 0; g < shape.kv_heads; ++g) {
    // Prompt key j at pk + j * d, decode slot s at kg + s * d.
    const float* pk = (own_prompt ? io.k : io.prompt_k) + g * prompt_stride;
    const float* pv = (own_prompt ? io.v : io.prompt_v) + g * prompt_stride;
    const float* kg = io.k + g * head_stride + static_cast<int64_t>(stored_prompt) * d;
    const float* vg = io.v + g * head_stride + static_cast<int64_t>(stored_prompt) * d;
    const int32_t* slots = io.attended + static_cast<int64_t>(g) * io.attended_stride;
    const int32_t count = io.counts[g];
    const int32_t total = lp + count;
    float* group_probs = io.attended_probs ? io.attended_probs + static_cast<int64_t>(g) * io.attended_stride : nullptr;
    if (group_probs) std::memset(group_probs, 0, sizeof(float) * io.attended_stride);

    for (int32_t h = g * group; h < (g + 1) * group; ++h) {
      const float* q = io.q + static_cast<int64_t>(h) * d;
      // Scores: prompt keys are contiguous, decode keys are gathered by slot.
      float max_logit = -INFINITY;
      for (int32_t j = 0; j < lp; ++j) {
        const float s = io.scale * Dot(q, pk + static_cast<int64_t>(j) * d, d);
        logits[j] = s;
        max_logit = s > max_logit ? s : max_logit;
      }
      for (int32_t i = 0; i < count; ++i) {
        if (i + kPrefetchAhead < count) PrefetchRow(kg + static_cast<int64_t>(slots[i + kPrefetchAhead]) * d, d);
        const float s = io.scale * Dot(q, kg + static_cast<int64_t>(slots[i]) * d, d);
        logits[lp + i] = s;
        max_logit = s > max_logit ? s : max_logit;
      }
      // Stable softmax: subtract the max before exponentiating.
      float sum = 0.0f;
      for (int32_t j = 0; j < total; ++j) {
        const float e = std::exp(logits[j] - max_logit);
        logits[j] = e;
        sum += e;
      }
      const float inv = 1.0f / sum;

      float* out = io.out + static_cast<int64_t>(h) * d;
      std::memset(out, 0, sizeof(float) * d);
      for (int32_t j = 0; j < lp; ++j) {
        const float p = logits[j] * inv;
        logits[j] = p;
        Axpy(p, pv + static_cast<int64_t>(j) * d, out, d);
      }
      for (int32_t i = 0; i < count; ++i) {
        if (i + kPrefetchAhead < count) PrefetchRow(vg + static_cast<int64_t>(slots[i + kPrefetchAhead]) * d, d);
        const float p = logits[lp + i] * inv;
        logits[lp + i] = p;
        Axpy(p, vg + static_cast<int64_t>(slots[i]) * d, out, d);
      }
      if (group_probs) {
        const float w = 1.0f / static_cast<float>(group);
        for (int32_t i = 0; i < count; ++i) group_probs[i] += w * logits[lp + i];
      }
      if (io.head_probs) {
        std::memcpy(io.head_probs + static_cast<int64_t>(h) * full_stride, logits, sizeof(float) * total);
      }
    }
  }
}

}  // namespace argen::cpu
