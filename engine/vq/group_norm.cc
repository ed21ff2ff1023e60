#include "engine/vq/group_norm.h"

#include <cmath>

namespace argen::vq {

namespace {

void NormalizeGroup(const GroupNormWeights& norm, int32_t g, int32_t per_group, const float* in, size_t hw, float* out,
                    bool swish) {
  const size_t count = static_cast<size_t>(per_group) * hw;
  {
    const size_t base = static_cast<size_t>(g) * count;
    const float* x = in + base;
    // Two passes in double: exact enough that the result does not depend on hw.
    double sum = 0.0;
    for (size_t i = 0; i < count; ++i) sum += x[i];
    const double mean = sum / static_cast<double>(count);
    double sq = 0.0;
    for (size_t i = 0; i < count; ++i) {
      const double d = x[i] - mean;
      sq += d * d;
    }
    const double inv_std = 1.0 / std::sqrt(sq / static_cast<double>(count) + kGroupNormEps);
    for (int32_t cc = 0; cc < per_group; ++cc) {
      const int32_t c = g * per_group + cc;
      // y = x * scale + shift, folded per channel.
      const float scale = static_cast<float>(norm.gamma[c] * inv_std);
      const float shift = static_cast<float>(norm.beta[c] - mean * norm.gamma[c] * inv_std);
      const float* xc = x + static_cast<size_t>(cc) * hw;
      float* yc = out + base + static_cast<size_t>(cc) * hw;
      if (swish) {
        for (size_t i = 0; i < hw; ++i) {
          const float y = xc[i] * scale + shift;
          yc[i] = y / (1.0f + std::exp(-y));
        }
      } else {
        for (size_t i = 0; i < hw; ++i) yc[i] = xc[i] * scale + shift;
      }
    }
  }
}

}  // namespace

void GroupNorm(const GroupNormWeights& norm, int32_t groups, const float* in, size_t hw, float* out, bool swish,
               parallel::ThreadPool* pool) {
  const int32_t per_group = norm.channels / groups;
  parallel::ParallelForRange(pool, groups, [&](int64_t b, int64_t e) {
    for (int64_t g = b; g < e; ++g) NormalizeGroup(norm, static_cast<int32_t>(g), per_group, in, hw, out, swish);
  });
}

}  // namespace argen::vq
