// The output stage of a model whose image tokens are vectors, not codes
// (ModelSpec::output.token_dim > 0; NextStep-1's flow-matching head): the
// family implements it, the backend calls it once per step for every output
// point of the step (engine/model/step_plan.h, "Vector inputs and outputs").
#pragma once

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "engine/model/flow_matching_head.h"
#include "engine/model/sampler.h"

namespace argen::model {

class TokenHead {
 public:
  virtual ~TokenHead() = default;
  // Floats per condition (ModelSpec::vector_head_in()) and per token
  // (ModelSpec::output.token_dim).
  virtual int32_t condition_width() const = 0;
  virtual int32_t token_dim() const = 0;
  // For each of n output points i: the cond and uncond rows' conditions
  // (cond/uncond [n x condition_width]), the pair's sampling (guidance,
  // seed, image index) and the index of the token drawn -> out [n x
  // token_dim]. Randomness must be keyed by (seed, image_index, token_index)
  // alone (kernels/sampling_rng.h), as code sampling is, so that how many
  // tokens a step carries changes nothing. Runs on the host for the CPU
  // backend.
  virtual absl::Status Draw(std::span<const float> cond, std::span<const float> uncond,
                            std::span<const SamplingSpec> sampling, std::span<const int32_t> token_index,
                            std::span<float> out) const = 0;
  // A flow-matching head a device backend can run itself (the CUDA
  // backend's device head draws the same tokens within its tolerance);
  // null: the head runs only as Draw, on the host.
  virtual const FlowMatchingHeadDesc* flow_matching() const { return nullptr; }
};

}  // namespace argen::model
