#include "engine/families/janus/janus_shapes.h"

namespace argen::janus {

absl::StatusOr<JanusConfig> PublishedJanusConfig(const std::string& name) {
  JanusConfig c;
  LanguageConfig& l = c.language;
  if (name == "1b") {
    l.num_hidden_layers = 24;
    l.hidden_size = 2048;
    l.num_attention_heads = 16;
    l.num_key_value_heads = 16;
    l.intermediate_size = 5632;
  } else if (name == "7b") {
    l.num_hidden_layers = 30;
    l.hidden_size = 4096;
    l.num_attention_heads = 32;
    l.num_key_value_heads = 32;
    l.intermediate_size = 11008;
  } else {
    return absl::InvalidArgumentError("Janus-Pro shape: expected 1b or 7b, got " + name);
  }
  l.head_dim = l.hidden_size / l.num_attention_heads;
  l.vocab_size = 102400;
  l.max_position_embeddings = 16384;
  l.rms_norm_eps = 1e-6;
  l.rope_theta = 10000.0;
  c.gen_vision.cls = "VQ-16";  // image_token_size 16384, n_embed 8, 384 px: the defaults
  c.gen_aligner = {"MlpProjector", "mlp_gelu", 2, c.gen_vision.n_embed, l.hidden_size};
  c.gen_head = {"vision_head", l.hidden_size, l.hidden_size, c.gen_vision.image_token_size};
  return c;
}

}  // namespace argen::janus
