// What a device backend needs to run a flow-matching token head itself
// (engine/model/token_head.h): NextStep-1's SimpleMLPAdaLN velocity net and
// its sampler, as engine/families/nextstep/flow_head.h implements them on the
// host (the reference the device is tested against). The family fills it;
// the backend uploads the weights and runs the same math:
//   c_emb = cond_embed(c); for each grid time t_k: y = time_embeddings[k] + c_emb,
//   h = input_proj(x); per block: shift, scale, gate = ada(SiLU(y)),
//   h += gate * fc2(SiLU(fc1(LayerNorm(h) * (1 + scale) + shift)));
//   shift, scale = final_ada(SiLU(y)), v = final_linear(LayerNorm0(h) * (1 + scale) + shift)
// (LayerNorm0: no affine; every LayerNorm eps 1e-6). Guidance on the
// velocity per pair (cfg > 1: v_u + cfg (v_c - v_u), else v_c), steps - 1
// Euler-Maruyama steps, one Euler step of last_step_size, then a non-affine
// LayerNorm of the token when `normalize`. Noise: kernels/sampling_rng.h's
// SampleNormal4 keyed (seed, image_index, token index, draw), draw 0 the
// start, draw k + 1 step k's, quad e / 4 of element e.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace argen::model {

struct FlowMatchingHeadDesc {
  // y = x W^T + b: W [out, in] row-major (a torch Linear), b [out]; f32 views
  // owned by the token head (valid while it lives).
  struct Linear {
    std::span<const float> weight, bias;
    int32_t out = 0, in = 0;
  };
  struct Block {
    std::span<const float> ln_weight, ln_bias;  // [width]
    Linear fc1, fc2;                            // [width, width]
    Linear ada;                                 // [3 width, width]: shift, scale, gate
  };

  int32_t token_dim = 0;  // x, v and the token
  int32_t cond_dim = 0;   // c
  int32_t width = 0;
  Linear cond_embed, input_proj;
  std::vector<Block> blocks;
  Linear final_ada;     // [2 width, width]: shift, scale
  Linear final_linear;  // [token_dim, width]

  // The sampler: times[k] (k < steps) of the shifted grid, the time
  // embedding of each [steps x width] (the same for every row), the final
  // Euler step and the token's normalization.
  std::vector<float> times;
  std::vector<float> time_embeddings;
  float last_step_size = 0;
  bool normalize = true;
  // TimestepEmbedder(t) for any t (tests of the velocity): out [width].
  std::function<void(float t, float* out)> time_embedding;
};

}  // namespace argen::model
