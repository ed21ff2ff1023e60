// The T5 encoder's shape from a hub T5 directory's config.json (transformers'
// T5Config: google/flan-t5-xl is d_model 2048, d_kv 64, 32 heads, d_ff 5120,
// 24 layers, 32 relative-position buckets over a max distance of 128,
// feed_forward_proj "gated-gelu", layer_norm_epsilon 1e-6). LlamaGen's
// text-to-image models condition on its last hidden state (language/t5.py).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace argen::llamagen {

struct T5EncoderConfig {
  int32_t vocab_size = 0;
  int32_t d_model = 0;
  int32_t d_kv = 0;  // per head
  int32_t num_heads = 0;
  int32_t d_ff = 0;
  int32_t num_layers = 0;
  int32_t relative_attention_num_buckets = 32;
  int32_t relative_attention_max_distance = 128;
  float layer_norm_epsilon = 1e-6f;
  int32_t eos_token_id = 1;
  int32_t pad_token_id = 0;

  int32_t inner_dim() const { return num_heads * d_kv; }
};

// Reads `t5_dir`/config.json. Only the gated-GELU feed-forward (T5 v1.1 and
// FLAN-T5; transformers' "gated-gelu", gelu_new) is taken: anything else is an
// error naming feed_forward_proj. Errors name the file and field.
absl::StatusOr<T5EncoderConfig> LoadT5EncoderConfig(const std::string& t5_dir);

}  // namespace argen::llamagen
