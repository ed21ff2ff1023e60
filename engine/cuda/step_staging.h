// Small conversions the step passes (cuda_prefill.cc, cuda_decode.cc) use
// to fill the per-step inputs they stage for the device.
#pragma once

#include <cstdint>

#include "engine/model/model_spec.h"
#include "engine/model/sampler.h"
#include "kernels/sampling.h"
#include "kernels/sparse/policy_types.h"
#include "kernels/token_meta.h"

namespace argen::cuda {

// The token flag and the launch's kv_formats bit of a row's KV format.
inline int32_t KvFormatFlag(const sparse::ResolvedPolicy& p) {
  return p.kv_format == sparse::KvFormat::kFp8E4m3 ? kernels::kTokenKvFp8 : 0;
}
inline int32_t KvFormatsBit(const sparse::ResolvedPolicy& p) {
  return p.kv_format == sparse::KvFormat::kFp8E4m3 ? kernels::kKvFormatsFp8 : kernels::kKvFormatsBf16;
}

// The rotary table row of a query: 1-D, its position (prompt position p, or
// prompt_len + t); 2-D (LlamaGen), row 0 for every prompt query (position-
// free) and 1 + t for decode index t (the table's layout, CudaBackend::Init).
inline int32_t RopePosition(const model::StackConfig& d, bool prompt, int32_t index, int32_t prompt_len) {
  if (d.rope == model::RopeKind::kGrid2d) return prompt ? 0 : 1 + index;
  return prompt ? index : prompt_len + index;
}

// A pair's sampling for the token of index `step` (the RNG is keyed by it).
inline kernels::PairSampling ToDevice(const model::SamplingSpec& s, int32_t step) {
  kernels::PairSampling p;
  p.temperature = s.temperature;
  p.top_k = s.top_k;
  p.top_p = s.top_p;
  p.cfg_weight = s.cfg_weight;
  p.seed = s.seed;
  p.image_index = s.image_index;
  p.step = step;
  return p;
}

}  // namespace argen::cuda
