// Resampling and pixel conversion of CHW float images.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/parallel/thread_pool.h"

namespace argen::vq {

// F.interpolate(scale_factor=2, mode="nearest"): out[c, y, x] = in[c, y/2, x/2]; out is [c, 2h, 2w].
void UpsampleNearest2x(const float* in, int32_t c, int32_t h, int32_t w, float* out,
                       parallel::ThreadPool* pool = nullptr);

// The official Janus conversion: clip((x + 1) / 2 * 255, 0, 255) in float32, then
// truncation toward zero (numpy's float -> uint8 assignment). chw [3, h, w] ->
// rgb [h, w, 3]. NaN maps to 0.
void ChwToRgb8(const float* chw, int32_t h, int32_t w, uint8_t* rgb, parallel::ThreadPool* pool = nullptr);

}  // namespace argen::vq
