#include "engine/vq/pixels.h"

#include <cmath>

namespace argen::vq {

void UpsampleNearest2x(const float* in, int32_t c, int32_t h, int32_t w, float* out, parallel::ThreadPool* pool) {
  const int32_t w2 = 2 * w;
  parallel::ParallelForRange(pool, c, [&](int64_t cb, int64_t ce) {
    for (int64_t ch = cb; ch < ce; ++ch) {
      const float* plane = in + static_cast<size_t>(ch) * h * w;
      float* dst = out + static_cast<size_t>(ch) * 4 * h * w;
      for (int32_t y = 0; y < h; ++y) {
        float* row0 = dst + static_cast<size_t>(2 * y) * w2;
        const float* src = plane + static_cast<size_t>(y) * w;
        for (int32_t x = 0; x < w; ++x) row0[2 * x] = row0[2 * x + 1] = src[x];
        float* row1 = row0 + w2;
        for (int32_t x = 0; x < w2; ++x) row1[x] = row0[x];
      }
    }
  });
}

void ChwToRgb8(const float* chw, int32_t h, int32_t w, uint8_t* rgb, parallel::ThreadPool* pool) {
  const size_t hw = static_cast<size_t>(h) * w;
  parallel::ParallelForRange(pool, static_cast<int64_t>(hw), [&](int64_t pb, int64_t pe) {
    for (size_t p = static_cast<size_t>(pb); p < static_cast<size_t>(pe); ++p) {
      for (int32_t c = 0; c < 3; ++c) {
        float v = (chw[c * hw + p] + 1.0f) / 2.0f * 255.0f;
        if (!(v > 0.0f)) v = 0.0f;  // also NaN
        if (v > 255.0f) v = 255.0f;
        rgb[3 * p + c] = static_cast<uint8_t>(v);  // truncates
      }
    }
  });
}

}  // namespace argen::vq
