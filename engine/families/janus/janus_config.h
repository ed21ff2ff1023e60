// config.json of a Janus-Pro checkpoint (model_type "multi_modality"), the
// parts text-to-image generation needs. The understanding-only sections
// (vision_config, aligner_config) are not read.
//
// The official VQ-16 architecture is fixed in code (janus/models/vq_model.py),
// not in config.json; its values are the defaults of vq::Vq16Config and may be
// overridden by optional extension keys in gen_vision_config.params
// (docs/checkpoint-format.md) so smaller models of the same architecture load
// through the same code.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/vq/vq_config.h"

namespace argen::janus {

// language_config: the Llama decoder (HF LlamaConfig field names and defaults).
struct LanguageConfig {
  int32_t hidden_size = 0;
  int32_t intermediate_size = 0;
  int32_t num_hidden_layers = 0;
  int32_t num_attention_heads = 0;
  int32_t num_key_value_heads = 0;  // default: num_attention_heads
  int32_t head_dim = 0;             // default: hidden_size / num_attention_heads
  double rms_norm_eps = 1e-6;       // LlamaConfig default; Janus-Pro's config omits it
  double rope_theta = 10000.0;
  int32_t vocab_size = 0;
  int32_t max_position_embeddings = 2048;
  std::string torch_dtype;  // "bfloat16", "float16", "float32" or "" (informational)
};

// gen_aligner_config: cls "MlpProjector", projector_type "mlp_gelu".
struct GenAlignerConfig {
  std::string cls;
  std::string projector_type;  // "mlp_gelu"
  int32_t depth = 2;           // Linear layers: layers.0, layers.2, ... with GELU between
  int32_t input_dim = 8;
  int32_t n_embed = 0;  // = language hidden_size
};

// gen_head_config: cls "vision_head".
struct GenHeadConfig {
  std::string cls;
  int32_t n_embed = 0;            // = language hidden_size
  int32_t image_token_embed = 0;  // width after output_mlp_projector
  int32_t image_token_size = 0;   // logits per position
};

struct JanusConfig {
  // argen extension "argen_system_prompt": the system prompt the model was
  // trained with (janus_chat_prompt.h); absent or "" = the official prompt.
  std::string system_prompt;
  LanguageConfig language;
  vq::Vq16Config gen_vision;  // gen_vision_config: cls "VQ-16" and its params
  GenAlignerConfig gen_aligner;
  GenHeadConfig gen_head;
};

// Parses and cross-checks config.json text; `file` names it in errors, which
// also name the field (e.g. "language_config.hidden_size").
absl::StatusOr<JanusConfig> ParseJanusConfig(const std::string& json_text, const std::string& file);
// Reads <dir>/config.json.
absl::StatusOr<JanusConfig> LoadJanusConfig(const std::string& dir);

}  // namespace argen::janus
