// Stride-1, zero-padded ("same") 2-D convolution of one CHW image as GEMMs:
// 1x1 directly, 3x3 through im2col over bands of output rows so the column
// buffer stays bounded whatever the image size.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/parallel/thread_pool.h"
#include "engine/vq/vq_weights.h"

namespace argen::vq {

// Floats of column scratch Conv2d needs at most for `conv` on an h x w image
// when the band may use up to `budget_floats` (always at least one output row).
size_t Conv2dScratchFloats(const Conv2dWeights& conv, int32_t h, int32_t w, size_t budget_floats);

// out[cout, h*w] (=|+=) conv(in[cin, h*w]) + bias. `col` holds `col_floats`
// floats (>= Conv2dScratchFloats for 3x3; unused for 1x1). in and out must not alias.
// `pool` (optional) runs im2col and the bias; the GEMM threads are OpenBLAS's.
void Conv2d(const Conv2dWeights& conv, const float* in, int32_t h, int32_t w, float* out, bool accumulate, float* col,
            size_t col_floats, parallel::ThreadPool* pool = nullptr);

}  // namespace argen::vq
