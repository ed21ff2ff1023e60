#include "bench/gpu/janus_shapes.h"

namespace argen::bench {

absl::StatusOr<model::ModelDims> JanusDims(const std::string& name) {
  model::ModelDims d;
  d.rms_norm_eps = 1e-6f;
  d.rope_theta = 10000.0f;
  d.text_vocab = 102400;
  d.image_vocab = 16384;
  d.image_embed_dim = 8;
  if (name == "1b") {
    d.num_layers = 24;
    d.hidden_size = 2048;
    d.num_heads = 16;
    d.num_kv_heads = 16;
    d.intermediate_size = 5632;
  } else if (name == "7b") {
    d.num_layers = 30;
    d.hidden_size = 4096;
    d.num_heads = 32;
    d.num_kv_heads = 32;
    d.intermediate_size = 11008;
  } else {
    return absl::InvalidArgumentError("--model: expected 1b or 7b, got " + name);
  }
  d.head_dim = d.hidden_size / d.num_heads;
  d.head_embed_dim = d.hidden_size;
  return d;
}

}  // namespace argen::bench
