#include "engine/families/nextstep/nextstep_config.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "engine/families/json_fields.h"
#include "nlohmann/json.hpp"

namespace argen::nextstep {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using families::JsonFields;

absl::Status Positive(const std::string& where, std::initializer_list<std::pair<const char*, int32_t>> fields) {
  for (auto [key, v] : fields) {
    if (v <= 0) return absl::InvalidArgumentError(absl::StrCat(where, ": field '", key, "' must be positive"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<NextStepConfig> ParseNextStepConfig(const std::string& json_text, const std::string& file) {
  absl::StatusOr<json> root = families::ParseJsonObject(json_text, file);
  if (!root.ok()) return root.status();
  const JsonFields f(*root, file);
  NextStepConfig c;
  for (auto [key, out] :
       {std::pair{"hidden_size", &c.hidden_size}, std::pair{"intermediate_size", &c.intermediate_size},
        std::pair{"num_hidden_layers", &c.num_hidden_layers}, std::pair{"num_attention_heads", &c.num_attention_heads},
        std::pair{"vocab_size", &c.vocab_size}, std::pair{"boi", &c.boi}, std::pair{"eoi", &c.eoi},
        std::pair{"image_placeholder_id", &c.image_placeholder_id}}) {
    if (absl::Status s = f.Int(key, out, /*required=*/true); !s.ok()) return s;
  }
  for (auto [key, out] :
       {std::pair{"num_key_value_heads", &c.num_key_value_heads}, std::pair{"head_dim", &c.head_dim},
        std::pair{"max_position_embeddings", &c.max_position_embeddings},
        std::pair{"latent_channels", &c.latent_channels}, std::pair{"latent_patch_size", &c.latent_patch_size},
        std::pair{"latent_size", &c.latent_size}, std::pair{"fm_head_dim", &c.fm_head_dim},
        std::pair{"fm_head_layers", &c.fm_head_layers}}) {
    if (absl::Status s = f.Int(key, out, /*required=*/false); !s.ok()) return s;
  }
  if (absl::Status s = f.Real("rms_norm_eps", &c.rms_norm_eps); !s.ok()) return s;
  if (absl::Status s = f.Real("rope_theta", &c.rope_theta); !s.ok()) return s;
  if (absl::Status s = f.String("vae_name_or_path", &c.vae_name_or_path); !s.ok()) return s;
  if (auto it = root->find("rope_scaling"); it != root->end() && !it->is_null()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": field 'rope_scaling' is ", it->dump(), "; argen runs NextStep's plain RoPE only"));
  }
  // q/k/v carry biases (Qwen2.5); o_proj's follows attention_bias unless o_attention_bias says otherwise.
  bool attention_bias = false, o_attention_bias = false, use_gen_pos_embed = false;
  if (absl::Status s = f.Bool("attention_bias", &attention_bias); !s.ok()) return s;
  o_attention_bias = attention_bias;
  if (absl::Status s = f.Bool("o_attention_bias", &o_attention_bias); !s.ok()) return s;
  if (!attention_bias) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": field 'attention_bias' must be true (NextStep's q/k/v projections have biases)"));
  }
  if (o_attention_bias) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": field 'o_attention_bias' must be false (argen's stack has no o_proj bias)"));
  }
  if (absl::Status s = f.Bool("use_gen_pos_embed", &use_gen_pos_embed); !s.ok()) return s;
  if (use_gen_pos_embed) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": field 'use_gen_pos_embed' is true; argen runs NextStep without gen_pos_embed"));
  }
  if (absl::Status s = f.Is("hidden_act", "silu", "NextStep's MLP is SwiGLU (silu)"); !s.ok()) return s;
  if (absl::Status s = f.Is("mlp_bias", false, "NextStep's MLP has no biases"); !s.ok()) return s;
  if (absl::Status s = f.Is("pretraining_tp", 1, "only pretraining_tp 1 is supported"); !s.ok()) return s;

  if (c.num_key_value_heads == 0) c.num_key_value_heads = c.num_attention_heads;
  if (absl::Status s = Positive(file, {{"hidden_size", c.hidden_size},
                                       {"intermediate_size", c.intermediate_size},
                                       {"num_hidden_layers", c.num_hidden_layers},
                                       {"num_attention_heads", c.num_attention_heads},
                                       {"num_key_value_heads", c.num_key_value_heads},
                                       {"vocab_size", c.vocab_size},
                                       {"latent_channels", c.latent_channels},
                                       {"latent_patch_size", c.latent_patch_size},
                                       {"latent_size", c.latent_size},
                                       {"fm_head_dim", c.fm_head_dim},
                                       {"fm_head_layers", c.fm_head_layers}});
      !s.ok()) {
    return s;
  }
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": num_attention_heads must be a multiple of num_key_value_heads"));
  }
  if (c.head_dim == 0) {
    if (c.hidden_size % c.num_attention_heads != 0) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": num_attention_heads must divide hidden_size"));
    }
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.head_dim <= 0 || c.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": head_dim must be positive and even (RoPE)"));
  }
  if (!(c.rope_theta > 0) || !(c.rms_norm_eps > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": rope_theta and rms_norm_eps must be positive"));
  }
  for (auto [key, id] :
       {std::pair{"boi", c.boi}, std::pair{"eoi", c.eoi}, std::pair{"image_placeholder_id", c.image_placeholder_id}}) {
    if (id < 0 || id >= c.vocab_size) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": field '", key, "' is ", id, ", outside the vocabulary [0, ", c.vocab_size, ")"));
    }
  }
  return c;
}

absl::StatusOr<NextStepConfig> LoadNextStepConfig(const std::string& model_dir) {
  const std::string path = (fs::path(model_dir) / "config.json").string();
  absl::StatusOr<std::string> text = families::ReadTextFile(path);
  if (!text.ok()) return text.status();
  return ParseNextStepConfig(*text, path);
}

absl::StatusOr<NextStepVaeConfig> ParseNextStepVaeConfig(const std::string& json_text, const std::string& file) {
  absl::StatusOr<json> root = families::ParseJsonObject(json_text, file);
  if (!root.ok()) return root.status();
  const JsonFields f(*root, file);
  NextStepVaeConfig c;
  for (auto [key, out] : {std::pair{"ch", &c.ch}, std::pair{"out_ch", &c.out_ch},
                          std::pair{"num_res_blocks", &c.num_res_blocks}, std::pair{"z_channels", &c.z_channels}}) {
    if (absl::Status s = f.Int(key, out, /*required=*/false); !s.ok()) return s;
  }
  if (absl::Status s = f.IntList("ch_mult", &c.ch_mult); !s.ok()) return s;
  if (absl::Status s = f.Real("scaling_factor", &c.scaling_factor); !s.ok()) return s;
  if (absl::Status s = f.Real("shift_factor", &c.shift_factor); !s.ok()) return s;
  if (absl::Status s =
          Positive(file, {{"ch", c.ch}, {"num_res_blocks", c.num_res_blocks}, {"z_channels", c.z_channels}});
      !s.ok()) {
    return s;
  }
  if (c.out_ch != 3) return absl::InvalidArgumentError(absl::StrCat(file, ": field 'out_ch' must be 3 (RGB)"));
  if (!(c.scaling_factor != 0)) {
    return absl::InvalidArgumentError(absl::StrCat(file, ": field 'scaling_factor' must be non-zero"));
  }
  for (int32_t m : c.ch_mult) {
    if ((c.ch * m) % 32 != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": ch * ch_mult must be a multiple of 32 (GroupNorm's groups), got ", c.ch * m));
    }
  }
  return c;
}

absl::StatusOr<NextStepVaeConfig> LoadNextStepVaeConfig(const std::string& vae_dir) {
  const std::string path = (fs::path(vae_dir) / "config.json").string();
  absl::StatusOr<std::string> text = families::ReadTextFile(path);
  if (!text.ok()) return text.status();
  return ParseNextStepVaeConfig(*text, path);
}

std::string NextStepVaeDir(const std::string& model_dir, const NextStepConfig& config) {
  if (!config.vae_name_or_path.empty()) {
    const fs::path p(config.vae_name_or_path);
    const fs::path dir = p.is_absolute() ? p : fs::path(model_dir) / p;
    std::error_code ec;
    if (fs::is_directory(dir, ec)) return dir.string();
  }
  return (fs::path(model_dir) / "vae").string();
}

}  // namespace argen::nextstep
