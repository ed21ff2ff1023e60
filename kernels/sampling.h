// CFG combine + temperature / top-k / top-p sampling on the device, one block
// per CFG pair, following engine/model/sampler.h exactly (threshold top-k and
// top-p, ties kept, inverse CDF in vocabulary order) with the uniforms of
// kernels/sampling_rng.h; temperature 0: the argmax of the guided logits
// (lowest index on ties).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace argen::kernels {

struct PairSampling {
  float temperature = 1.0f;  // 0: greedy
  int32_t top_k = 0;
  float top_p = 1.0f;
  float cfg_weight = 5.0f;
  uint64_t seed = 0;
  int32_t image_index = 0;
  int32_t step = 0;  // RNG step of the token being drawn
};

// Largest vocabulary the sampler holds in shared memory.
constexpr int32_t kMaxSampleVocab = 50000;

// logits: fp32 [2 * pairs][vocab], rows 2i (cond) and 2i+1 (uncond) of pair i.
// Writes tokens[i]. cudaErrorInvalidValue when vocab is out of range.
cudaError_t CfgSample(const float* logits, int32_t pairs, int32_t vocab, const PairSampling* params, int32_t* tokens,
                      cudaStream_t stream);

}  // namespace argen::kernels
