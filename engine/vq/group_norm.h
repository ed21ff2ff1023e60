// nn.GroupNorm (eps 1e-6, affine) on one CHW image, optionally followed by
// swish (x * sigmoid(x)), which every GroupNorm of the decoder except the
// attention blocks' is.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/parallel/thread_pool.h"
#include "engine/vq/vq_weights.h"

namespace argen::vq {

inline constexpr float kGroupNormEps = 1e-6f;

// out[c, :] = swish?(gamma[c] * (in[c, :] - mean_g) / sqrt(var_g + eps) + beta[c]),
// mean/var (biased) over the channels of group g and all hw positions. in may equal out.
// `pool` (optional) splits the groups.
void GroupNorm(const GroupNormWeights& norm, int32_t groups, const float* in, size_t hw, float* out, bool swish,
               parallel::ThreadPool* pool = nullptr);

}  // namespace argen::vq
