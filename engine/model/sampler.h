// Classifier-free guidance and image-token sampling, the reference semantics
// every backend reproduces (the CUDA backend on device, with the same uniforms
// from sampling_rng.h). Per CFG pair:
//
//   1. logits[v] = uncond[v] + cfg_weight * (cond[v] - uncond[v])
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

namespace argen::model {

// Per-pair sampling parameters, as the backend receives them (validated by the engine).
struct SamplingSpec {
  float temperature = 1.0f;  // > 0
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

  // Combines one CFG pair's logits and draws a token with uniform `u` in [0, 1).
  int32_t Sample(const float* cond_logits, const float* uncond_logits, const SamplingSpec& spec,
                 float u);

  // The normalised distribution the last Sample() drew from (zeros for
  // filtered tokens); for tests.
  const std::vector<float>& last_probs() const { return probs_; }

 private:
  int32_t vocab_;
  std::vector<float> logits_;
  std::vector<float> probs_;
  std::vector<float> sorted_;
};

}  // namespace argen::model
