// NextStep-1 (14B) for random-weight benchmarks: the published config.json's
// shape read by the family's own config reader and spec builder
// (engine/families/nextstep), and random weights of sane scale for the two
// networks a random device backend cannot make itself: the flow-matching
// token head (the family's FlowHead, described for a device backend) and
// the VAE decoder (the family's Flux decoder config).
#pragma once

#include <cstdint>
#include <memory>

#include "absl/status/statusor.h"
#include "engine/families/nextstep/flow_head.h"
#include "engine/families/nextstep/nextstep_config.h"
#include "engine/model/flow_matching_head.h"
#include "engine/vqgan/vqgan_config.h"
#include "engine/vqgan/vqgan_weights.h"

namespace argen::bench {

// example.py's guidance on the velocity (the family's default cfg_weight).
inline constexpr float kNextStepCfgWeight = 7.5f;

// stepfun-ai/NextStep-1-Large's config.json (the fields that shape the
// model), through nextstep::ParseNextStepConfig.
absl::StatusOr<nextstep::NextStepConfig> PublishedNextStepConfig();

// A flow head with random weights: `head` owns them, `desc` views them with
// the family's sampler (FlowSampling's defaults: 50 steps, shift 1, use_norm).
struct RandomFlowHead {
  std::unique_ptr<nextstep::FlowHead> head;
  model::FlowMatchingHeadDesc desc;
};

// Weights uniform with standard deviation 1 / sqrt(fan_in) (activations stay
// O(1) through the blocks), biases 0.02, LayerNorm weights 1 and biases 0;
// the same values for the same seed.
absl::StatusOr<std::unique_ptr<RandomFlowHead>> RandomNextStepFlowHead(const nextstep::NextStepConfig& config,
                                                                       uint64_t seed);

// The VAE decoder (NextStep-1-f8ch16-Tokenizer's shape: NextStepVaeConfig's
// defaults) as the family configures it, with random weights of the same scales.
struct RandomVae {
  vqgan::VqganConfig config;
  vqgan::VqganDecoderWeights weights;
};
absl::StatusOr<RandomVae> RandomNextStepVae(uint64_t seed);

}  // namespace argen::bench
