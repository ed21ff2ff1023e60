// config.json of a Lumina-mGPT checkpoint (HF ChameleonForConditionalGeneration,
// model_type "chameleon"; docs/lumina-mgpt.md "config.json"): the decoder's
// fields, the embedded vocabulary_map (every token name -> id, where the image
// tokens are found) and argen's optional extension key argen_image_sizes
// ([[W, H], ...]: the sizes a small model supports). The vq_config section
// describes only the VQGAN encoder (HF); the decoder's facts come from
// vqgan.yaml.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace argen::lumina {

struct LuminaConfig {
  int32_t hidden_size = 0;
  int32_t intermediate_size = 0;
  int32_t num_hidden_layers = 0;
  int32_t num_attention_heads = 0;
  int32_t num_key_value_heads = 0;  // default: num_attention_heads
  int32_t head_dim = 0;             // default: hidden_size / num_attention_heads
  double rms_norm_eps = 1e-5;
  double rope_theta = 10000.0;  // rope_theta, or rope_parameters.rope_theta (HF 5.x)
  int32_t vocab_size = 0;
  int32_t max_position_embeddings = 4096;
  int32_t model_parallel_size = 1;  // Lumina-mGPT's q/k-norm groups
  bool swin_norm = false;
  bool tie_word_embeddings = false;
  std::vector<std::pair<std::string, int32_t>> vocabulary_map;  // sorted by id
  std::vector<std::pair<int32_t, int32_t>> image_sizes;         // argen_image_sizes (W, H); empty: absent
};

// Parses and checks config.json text; errors name `file` and the field.
absl::StatusOr<LuminaConfig> ParseLuminaConfig(const std::string& json_text, const std::string& file);
// Reads <dir>/config.json.
absl::StatusOr<LuminaConfig> LoadLuminaConfig(const std::string& dir);

}  // namespace argen::lumina
