// Small conversions the step passes (cuda_prefill.cc, cuda_decode.cc) use
// to fill the per-step inputs they stage for the device.
#pragma once

#include <cstdint>

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
