// NextStep-1's flow-matching head on the CPU (nextstep/models/
// modeling_fm_head.py: FlowMatchingHead.sample over SimpleMLPAdaLN), fp32.
//
// The velocity net v(x, t, c): x [token_dim] -> input_proj; y = TimestepEmbedder(t)
// (256 sinusoids [cos, sin], Linear, SiLU, Linear) + cond_embed(c); `blocks`
// AdaLN residual blocks (shift, scale, gate = Linear(SiLU(y)); x += gate *
// MLP(LayerNorm(x) * (1 + scale) + shift), MLP = Linear, SiLU, Linear); the
// final layer (non-affine LayerNorm modulated by Linear(SiLU(y)), Linear to
// token_dim). Every LayerNorm has eps 1e-6.
//
// The sampler integrates the SDE from t = 0 (noise) towards 1 (data):
// steps - 1 Euler-Maruyama steps over linspace(0, 1 - last_step_size, steps)
// shifted t / (shift - (shift - 1) t), then one Euler step of last_step_size
// on the guided velocity. Guidance (cfg > 1): v = v_uncond + cfg (v_cond -
// v_uncond), both branches at the same x; at cfg <= 1 the cond branch alone,
// as the official cfg_mult 1. Each Euler-Maruyama step at t: score = (t v -
// x) / (1 - t), drift = v + (1 - t) score, x += drift dt + sqrt(2 (1 - t))
// sqrt(dt) w. The pipeline's use_norm then LayerNorms the token (no affine,
// eps 1e-6).
//
// Noise comes from a caller's function: draw 0 is the starting x, draw k >= 1
// step k's w (KeyedNoise: the engine's counter-based RNG, so a seed
// reproduces an image; tests inject the official code's draws).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "engine/model/flow_matching_head.h"
#include "engine/model/model_spec.h"

namespace argen::nextstep {

struct FlowHeadDims {
  int32_t token_dim = 0;      // latent_channels * patch^2 (64)
  int32_t cond_dim = 0;       // the decoder's hidden_size
  int32_t width = 0;          // fm_head_dim (1536)
  int32_t blocks = 0;         // fm_head_layers (12)
  int32_t frequencies = 256;  // TimestepEmbedder's frequency_embedding_size
};

// Every tensor of the head under `prefix` ("image_head.net."), with biases, in
// model order, for validating a checkpoint.
std::vector<model::TensorRef> FlowHeadTensors(const std::string& prefix, const FlowHeadDims& dims);

struct FlowSampling {
  int32_t steps = 50;            // num_sampling_steps (>= 2)
  float cfg = 7.5f;              // guidance on the velocity
  float timesteps_shift = 1.0f;  // the time grid's shift
  float last_step_size = 0.04f;  // the final Euler step
  bool normalize = true;         // the pipeline's use_norm
};

// pair, draw, out[token_dim]: standard normals.
using NoiseFn = std::function<void(int32_t pair, int32_t draw, float* out)>;

// The engine's noise for token `token` of image `image` of a request seeded
// `seed` (kernels/sampling_rng.h's Philox, Box-Muller): pairs of the call map
// to images through `images` (its size is the call's pair count) and share `token`.
NoiseFn KeyedNoise(uint64_t seed, std::vector<uint32_t> images, uint32_t token, int32_t token_dim);

class FlowHead {
 public:
  // name, shape -> the tensor as f32 row-major (errors name the tensor).
  using TensorSource =
      std::function<absl::StatusOr<std::vector<float>>(const std::string& name, const std::vector<int64_t>& shape)>;

  static absl::StatusOr<std::unique_ptr<FlowHead>> Load(const TensorSource& source, const std::string& prefix,
                                                        const FlowHeadDims& dims);

  // The net's velocity for n rows: x [n, token_dim], t the time of every row,
  // c [n, cond_dim] -> v [n, token_dim].
  void Velocity(const float* x, float t, const float* c, int32_t n, float* v) const;

  // One token per pair: cond, uncond [pairs, cond_dim] (uncond unused, may be
  // null, at cfg <= 1) -> tokens [pairs, token_dim]. InvalidArgument for
  // steps < 2, a non-finite cfg or shift, last_step_size outside (0, 1).
  absl::Status Sample(const float* cond, const float* uncond, int32_t pairs, const FlowSampling& sampling,
                      const NoiseFn& noise, float* tokens) const;

  const FlowHeadDims& dims() const { return dims_; }

  // TimestepEmbedder(t): out [width].
  void TimeEmbedding(float t, float* out) const;
  // The head and `sampling` (its cfg aside: each pair's) for a device
  // backend (engine/model/flow_matching_head.h): views of this head's
  // weights (valid while it lives), the time grid and its embeddings as
  // Sample computes them. No times when sampling.steps < 2 (Sample refuses those).
  model::FlowMatchingHeadDesc Describe(const FlowSampling& sampling) const;

 private:
  struct Linear {
    std::vector<float> weight, bias;  // [out, in], [out]
    int32_t out = 0, in = 0;
  };
  struct Block {
    std::vector<float> ln_weight, ln_bias;
    Linear fc1, fc2, ada;  // mlp.0, mlp.2, adaLN_modulation.1
  };

  explicit FlowHead(const FlowHeadDims& dims) : dims_(dims) {}
  // y[n, in] -> out[n, out] = y W^T + b.
  static void Apply(const Linear& l, const float* x, int32_t n, float* out);
  // The conditioning embedding cond_embed(c) [n, width] (constant over the sampler's steps).
  void CondEmbed(const float* c, int32_t n, float* out) const;
  // The net with cond_embed(c) precomputed.
  void VelocityEmbedded(const float* x, float t, const float* c_emb, int32_t n, float* v) const;

  FlowHeadDims dims_;
  Linear time_fc1, time_fc2, cond_embed, input_proj, final_ada, final_linear;
  std::vector<Block> blocks_;
};

}  // namespace argen::nextstep
