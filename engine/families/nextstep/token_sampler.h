// One NextStep-1 image token per cond/uncond pair from the decoder's
// final-normed last hidden states, as NextStepPipeline.decoding does per step:
// c = image_out_projector(h) for both rows, the flow-matching head's sampler
// (CFG on the velocity), then use_norm's LayerNorm (FlowSampling::normalize).
// Thread-compatible: Sample is const and keeps no state between calls.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/families/nextstep/flow_head.h"
#include "engine/families/nextstep/nextstep_config.h"

namespace argen::nextstep {

class NextStepTokenSampler {
 public:
  // image_out_projector and image_head.net.* from `checkpoint` (errors name the tensor).
  static absl::StatusOr<std::unique_ptr<NextStepTokenSampler>> Load(const checkpoint::Checkpoint& checkpoint,
                                                                    const NextStepConfig& config);

  // cond, uncond: [pairs, hidden_size] (uncond may be null at cfg <= 1) ->
  // tokens [pairs, token_dim]. Errors as FlowHead::Sample's.
  absl::Status Sample(const float* cond, const float* uncond, int32_t pairs, const FlowSampling& sampling,
                      const NoiseFn& noise, float* tokens) const;

  int32_t hidden_size() const { return hidden_; }
  int32_t token_dim() const { return head_->dims().token_dim; }

 private:
  NextStepTokenSampler(std::unique_ptr<FlowHead> head, std::vector<float> weight, std::vector<float> bias,
                       int32_t hidden)
      : head_(std::move(head)), weight_(std::move(weight)), bias_(std::move(bias)), hidden_(hidden) {}
  void Project(const float* h, int32_t n, float* out) const;

  std::unique_ptr<FlowHead> head_;
  std::vector<float> weight_, bias_;  // image_out_projector [hidden, hidden], [hidden]
  int32_t hidden_ = 0;
};

}  // namespace argen::nextstep
