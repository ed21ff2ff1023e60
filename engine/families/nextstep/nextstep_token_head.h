// NextStep-1's output stage for the engine (model::TokenHead): the backend
// hands it image_out_projector(final-normed h) of each output point's cond and
// uncond rows (spec.output.vector_out); it draws the token with the
// flow-matching head (flow_head.h): CFG on the velocity with the pair's
// cfg_weight, the family's sampler settings, use_norm, and noise keyed by
// (seed, image_index, token index) (KeyedNoise), so a seed reproduces an
// image whatever else shares its steps. On the host (the CPU backend's).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/families/nextstep/flow_head.h"
#include "engine/families/nextstep/nextstep_config.h"
#include "engine/model/token_head.h"

namespace argen::nextstep {

class NextStepTokenHead final : public model::TokenHead {
 public:
  // image_head.net.* from `checkpoint`; `sampling`'s cfg is replaced by each pair's cfg_weight.
  static absl::StatusOr<std::shared_ptr<const NextStepTokenHead>> Load(const checkpoint::Checkpoint& checkpoint,
                                                                       const NextStepConfig& config,
                                                                       const FlowSampling& sampling);

  int32_t condition_width() const override { return head_->dims().cond_dim; }
  int32_t token_dim() const override { return head_->dims().token_dim; }
  absl::Status Draw(std::span<const float> cond, std::span<const float> uncond,
                    std::span<const model::SamplingSpec> sampling, std::span<const int32_t> token_index,
                    std::span<float> out) const override;
  // The flow head and the family's sampler settings for a device backend.
  const model::FlowMatchingHeadDesc* flow_matching() const override { return &device_; }

 private:
  NextStepTokenHead(std::unique_ptr<FlowHead> head, const FlowSampling& sampling)
      : head_(std::move(head)), sampling_(sampling), device_(head_->Describe(sampling)) {}

  std::unique_ptr<FlowHead> head_;
  FlowSampling sampling_;
  model::FlowMatchingHeadDesc device_;  // views of head_'s weights
};

}  // namespace argen::nextstep
