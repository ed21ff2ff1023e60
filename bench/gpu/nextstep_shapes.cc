#include "bench/gpu/nextstep_shapes.h"

#include <cmath>
#include <string>
#include <vector>

#include "engine/families/nextstep/nextstep_vae.h"

namespace argen::bench {
namespace {

// stepfun-ai/NextStep-1-Large and NextStep-1.1 config.json: the decoder is
// Qwen2.5-14B's (q/k/v biases, o_proj without); the image fields are
// configuration_nextstep.py's defaults, which the hub configs do not change.
// vocab_size and rope_theta are Qwen2.5-14B's (neither changes a step's time).
constexpr char kPublishedConfigJson[] = R"({
  "model_type": "nextstep",
  "hidden_size": 5120,
  "intermediate_size": 13824,
  "num_hidden_layers": 48,
  "num_attention_heads": 40,
  "num_key_value_heads": 8,
  "head_dim": 128,
  "rms_norm_eps": 1e-05,
  "rope_theta": 1000000.0,
  "vocab_size": 152064,
  "max_position_embeddings": 131072,
  "attention_bias": true,
  "o_attention_bias": false,
  "mlp_bias": false,
  "hidden_act": "silu",
  "boi": 151667,
  "eoi": 151668,
  "image_placeholder_id": 151669,
  "latent_size": 32,
  "latent_patch_size": 2,
  "latent_channels": 16,
  "fm_head_dim": 1536,
  "fm_head_layers": 12
})";

// splitmix64: a counter-based stream, so a tensor's values depend only on (seed, tensor, element).
uint64_t Mix(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

// A tensor source of random values: fan-in scaled matrices (uniform, std
// 1 / sqrt(fan_in)), 1-D tensors 0.02 around 1 for norm weights and 0 for the rest.
class RandomTensors {
 public:
  explicit RandomTensors(uint64_t seed) : seed_(seed) {}
  absl::StatusOr<std::vector<float>> operator()(const std::string& name, const std::vector<int64_t>& shape) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    const uint64_t stream = Mix(seed_ ^ Mix(++tensors_));
    const bool matrix = shape.size() > 1;
    const bool norm_weight = !matrix && name.ends_with(".weight") &&
                             (name.find("norm") != std::string::npos || name.find("_ln") != std::string::npos);
    const double std_dev = matrix ? 1.0 / std::sqrt(static_cast<double>(n / shape[0])) : 0.02;
    const float half_width = static_cast<float>(std_dev * std::sqrt(3.0));
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const float u = static_cast<float>(Mix(stream + static_cast<uint64_t>(i)) >> 40) * (1.0f / 16777216.0f);
      v[i] = (norm_weight ? 1.0f : 0.0f) + (2.0f * u - 1.0f) * half_width;
    }
    return v;
  }

 private:
  uint64_t seed_;
  uint64_t tensors_ = 0;
};

}  // namespace

absl::StatusOr<nextstep::NextStepConfig> PublishedNextStepConfig() {
  return nextstep::ParseNextStepConfig(kPublishedConfigJson, "the published NextStep-1-Large config.json");
}

absl::StatusOr<std::unique_ptr<RandomFlowHead>> RandomNextStepFlowHead(const nextstep::NextStepConfig& config,
                                                                       uint64_t seed) {
  RandomTensors random(seed);
  // The family's dims (as NextStepTokenHead::Load makes them).
  const nextstep::FlowHeadDims dims{config.token_dim(), config.hidden_size, config.fm_head_dim, config.fm_head_layers};
  absl::StatusOr<std::unique_ptr<nextstep::FlowHead>> head = nextstep::FlowHead::Load(
      [&random](const std::string& name, const std::vector<int64_t>& shape) { return random(name, shape); }, "random.",
      dims);
  if (!head.ok()) return head.status();
  auto out = std::make_unique<RandomFlowHead>();
  out->head = *std::move(head);
  out->desc = out->head->Describe(nextstep::FlowSampling{});
  return out;
}

absl::StatusOr<RandomVae> RandomNextStepVae(uint64_t seed) {
  RandomTensors random(seed);
  RandomVae vae;
  vae.config = nextstep::FluxDecoderConfig(nextstep::NextStepVaeConfig{});
  absl::StatusOr<vqgan::VqganDecoderWeights> w = vqgan::LoadVqganDecoderWeights(
      [&random](const std::string& name, const std::vector<int64_t>& shape) { return random(name, shape); },
      vae.config);
  if (!w.ok()) return w.status();
  vae.weights = *std::move(w);
  return vae;
}

}  // namespace argen::bench
