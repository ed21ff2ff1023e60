#include "engine/model/model_dims.h"

#include "absl/strings/str_cat.h"

namespace argen::model {

absl::StatusOr<ModelDims> ModelDimsFromConfig(const checkpoint::JanusConfig& config) {
  const checkpoint::LanguageConfig& lang = config.language;
  ModelDims d;
  d.num_layers = lang.num_hidden_layers;
  d.hidden_size = lang.hidden_size;
  d.num_heads = lang.num_attention_heads;
  d.num_kv_heads =
      lang.num_key_value_heads > 0 ? lang.num_key_value_heads : lang.num_attention_heads;
  d.head_dim =
      lang.head_dim > 0 ? lang.head_dim : (d.num_heads > 0 ? lang.hidden_size / d.num_heads : 0);
  d.intermediate_size = lang.intermediate_size;
  d.text_vocab = lang.vocab_size;
  d.rms_norm_eps = static_cast<float>(lang.rms_norm_eps);
  d.rope_theta = static_cast<float>(lang.rope_theta);
  d.image_vocab = config.gen_head.image_token_size;
  d.image_embed_dim = config.gen_vision.n_embed;
  d.head_embed_dim = config.gen_head.image_token_embed;

  auto positive = [](int32_t v, const char* field) -> absl::Status {
    if (v > 0) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("config.json: ", field, " must be positive, got ", v));
  };
  for (auto [v, f] : {std::pair{d.num_layers, "language_config.num_hidden_layers"},
                      {d.hidden_size, "language_config.hidden_size"},
                      {d.num_heads, "language_config.num_attention_heads"},
                      {d.num_kv_heads, "language_config.num_key_value_heads"},
                      {d.head_dim, "language_config.head_dim"},
                      {d.intermediate_size, "language_config.intermediate_size"},
                      {d.text_vocab, "language_config.vocab_size"},
                      {d.image_vocab, "gen_head_config.params.image_token_size"},
                      {d.image_embed_dim, "gen_vision_config.params.n_embed"},
                      {d.head_embed_dim, "gen_head_config.params.image_token_embed"}}) {
    if (absl::Status s = positive(v, f); !s.ok()) return s;
  }
  if (d.num_heads % d.num_kv_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json: language_config.num_attention_heads (", d.num_heads,
                     ") must be a multiple of num_key_value_heads (", d.num_kv_heads, ")"));
  }
  if (d.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config.json: language_config.head_dim must be even for RoPE, got ", d.head_dim));
  }
  if (config.gen_aligner.n_embed != 0 && config.gen_aligner.n_embed != d.hidden_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json: gen_aligner_config.params.n_embed (", config.gen_aligner.n_embed,
                     ") must equal language_config.hidden_size (", d.hidden_size, ")"));
  }
  if (config.gen_aligner.input_dim != d.image_embed_dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config.json: gen_aligner_config.params.input_dim (", config.gen_aligner.input_dim,
        ") must equal gen_vision_config.params.n_embed (", d.image_embed_dim, ")"));
  }
  if (config.gen_aligner.depth != 2) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config.json: gen_aligner_config.params.depth must be 2 (Linear, GELU, Linear), got ",
        config.gen_aligner.depth));
  }
  if (config.gen_vision.image_token_size != d.image_vocab) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json: gen_vision_config.params.image_token_size (",
                     config.gen_vision.image_token_size,
                     ") must equal gen_head_config.params.image_token_size (", d.image_vocab, ")"));
  }
  return d;
}

}  // namespace argen::model
