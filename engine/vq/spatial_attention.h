// The core of the VQ AttnBlock: single-head softmax attention over the n = h*w
// positions of one image, channels as the head width, scale 1/sqrt(c).
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/parallel/thread_pool.h"

namespace argen::vq {

// q, k, v, out: [c, n] (CHW). scores: n*n floats of scratch.
// out[:, i] = sum_j softmax_j(q[:, i] . k[:, j] / sqrt(c)) v[:, j].
// `pool` (optional) splits the softmax rows.
void SpatialAttention(const float* q, const float* k, const float* v, int32_t c, int32_t n, float* scores, float* out,
                      parallel::ThreadPool* pool = nullptr);

}  // namespace argen::vq
