// Classifier-free guidance and image-token sampling, the reference semantics
// every backend reproduces (the CUDA backend on device, with the same uniforms
// from kernels/sampling_rng.h), and the one set of sampling ranges every layer
// enforces. Per CFG pair:
//
//   1. logits[v] = uncond[v] + cfg_weight * (cond[v] - uncond[v])
//      temperature 0 (greedy): the token is the first v with the largest
//      logits[v]; steps 2-6 do not apply and no uniform is used
//   2. logits[v] /= temperature
//   3. top_k > 0: keep tokens whose logit >= the k-th largest logit (ties kept)
//   4. p = softmax over the kept tokens (max-subtracted, f32)
//   5. top_p < 1: let p* be the smallest probability such that the kept tokens
//      with p >= p* hold at least top_p of the mass (sorted descending prefix);
//      keep exactly the tokens with p >= p* (ties kept)
//   6. u = SampleUniform(seed, image_index, step); walk the kept tokens in
//      vocabulary order accumulating p until the sum exceeds u * (kept mass);
//      that token is drawn (the last kept token if rounding leaves none).
//
// With top_k = 0 and top_p = 1 this is the official Janus sampling
// (torch.softmax(logits / temperature) then torch.multinomial), up to the
// random stream.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace argen::model {

// The ranges of the sampling parameters, for every layer (the server's config
// and requests, the engine's validation, the backends' batch checks, and what
// GetModelInfo advertises: engine/request_rules.h).
inline constexpr double kMaxTemperature = 100.0;  // temperature in [0, 100]; 0: greedy
inline constexpr double kMaxCfgWeight = 100.0;    // cfg_weight in [0, 100]
// Each names no field: callers prefix it ("temperature: must be in ...").
absl::Status CheckTemperature(double temperature);
absl::Status CheckCfgWeight(double cfg_weight);
absl::Status CheckTopK(int64_t top_k, int64_t vocab);  // [0, vocab]; vocab 0: no upper bound
absl::Status CheckTopP(double top_p);                  // (0, 1]

// Per-pair sampling parameters, as the backend receives them (validated by the engine).
struct SamplingSpec {
  float temperature = 1.0f;  // [0, 100]; 0: greedy
  int32_t top_k = 0;         // 0: off
  float top_p = 1.0f;        // (0, 1]; 1: off
  float cfg_weight = 5.0f;
  uint64_t seed = 0;
  int32_t image_index = 0;  // which image of its request this pair makes
};

// Host reference sampler. Owns its scratch (sized for the vocabulary once), so
// sampling allocates nothing per token. One instance per thread.
class HostSampler {
 public:
  explicit HostSampler(int32_t vocab);

  // Combines one CFG pair's logits and draws a token with uniform `u` in [0, 1)
  // (unused when temperature is 0: the argmax).
  int32_t Sample(const float* cond_logits, const float* uncond_logits, const SamplingSpec& spec, float u);

  // The normalised distribution the last Sample() drew from (zeros for
  // filtered tokens; one-hot for greedy); for tests.
  const std::vector<float>& last_probs() const { return probs_; }

 private:
  int32_t vocab_;
  std::vector<float> logits_;
  std::vector<float> probs_;
  std::vector<float> sorted_;
};

}  // namespace argen::model
