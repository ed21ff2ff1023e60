#include "engine/families/emu3/emu3_config.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "engine/families/json_fields.h"
#include "nlohmann/json.hpp"

namespace argen::emu3 {
namespace {

using nlohmann::json;

using families::JsonFields;

absl::Status ReadDecoder(const json& o, const std::string& where, Emu3Config& c) {
  JsonFields f(o, where);
  for (auto [key, out] :
       {std::pair{"hidden_size", &c.hidden_size}, std::pair{"intermediate_size", &c.intermediate_size},
        std::pair{"num_hidden_layers", &c.num_hidden_layers}, std::pair{"num_attention_heads", &c.num_attention_heads},
        std::pair{"vocab_size", &c.vocab_size}}) {
    if (absl::Status s = f.Int(key, out, /*required=*/true); !s.ok()) return s;
  }
  for (auto [key, out] :
       {std::pair{"num_key_value_heads", &c.num_key_value_heads},
        std::pair{"max_position_embeddings", &c.max_position_embeddings}, std::pair{"bos_token_id", &c.bos_token_id},
        std::pair{"eos_token_id", &c.eos_token_id}, std::pair{"pad_token_id", &c.pad_token_id}}) {
    if (absl::Status s = f.Int(key, out, /*required=*/false); !s.ok()) return s;
  }
  if (absl::Status s = f.Real("rms_norm_eps", &c.rms_norm_eps); !s.ok()) return s;
  if (absl::Status s = f.Real("rope_theta", &c.rope_theta); !s.ok()) return s;
  if (auto it = o.find("rope_parameters"); it != o.end() && it->is_object()) {
    JsonFields rp(*it, where + " rope_parameters");
    if (absl::Status s = rp.Real("rope_theta", &c.rope_theta); !s.ok()) return s;
    if (absl::Status s = rp.Is("rope_type", "default", "argen runs Emu3's plain RoPE only"); !s.ok()) return s;
  }
  if (auto it = o.find("rope_scaling"); it != o.end() && it->is_object()) {
    JsonFields rs(*it, where + " rope_scaling");
    const char* key = it->contains("rope_type") ? "rope_type" : "type";
    if (absl::Status s = rs.Is(key, "default", "argen runs Emu3's plain RoPE only (no scaling)"); !s.ok()) return s;
  } else if (it != o.end() && !it->is_null()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": field 'rope_scaling' must be an object or null"));
  }
  if (absl::Status s = f.Is("hidden_act", "silu", "Emu3's MLP is SwiGLU (silu)"); !s.ok()) return s;
  if (absl::Status s = f.Is("attention_bias", false, "Emu3's attention has no biases"); !s.ok()) return s;
  if (absl::Status s = f.Is("mlp_bias", false, "Emu3's MLP has no biases"); !s.ok()) return s;
  if (absl::Status s = f.Is("pretraining_tp", 1, "only pretraining_tp 1 is supported"); !s.ok()) return s;
  if (absl::Status s = f.Is("tie_word_embeddings", false, "Emu3's lm_head is its own tensor"); !s.ok()) return s;
  if (c.num_key_value_heads == 0) c.num_key_value_heads = c.num_attention_heads;
  for (auto [key, v] :
       {std::pair{"hidden_size", c.hidden_size}, std::pair{"intermediate_size", c.intermediate_size},
        std::pair{"num_hidden_layers", c.num_hidden_layers}, std::pair{"num_attention_heads", c.num_attention_heads},
        std::pair{"num_key_value_heads", c.num_key_value_heads}, std::pair{"vocab_size", c.vocab_size},
        std::pair{"max_position_embeddings", c.max_position_embeddings}}) {
    if (v <= 0) return absl::InvalidArgumentError(absl::StrCat(where, ": field '", key, "' must be positive"));
  }
  if (c.hidden_size % c.num_attention_heads != 0 || c.num_attention_heads % c.num_key_value_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat(where,
                                                   ": num_attention_heads must divide hidden_size and be a "
                                                   "multiple of num_key_value_heads"));
  }
  c.head_dim = c.hidden_size / c.num_attention_heads;
  if (c.head_dim % 2 != 0) return absl::InvalidArgumentError(absl::StrCat(where, ": head_dim must be even (RoPE)"));
  if (!(c.rope_theta > 0) || !(c.rms_norm_eps > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": rope_theta and rms_norm_eps must be positive"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Emu3Config> ParseEmu3Config(const std::string& text, const std::string& file) {
  absl::StatusOr<json> root = families::ParseJsonObject(text, file);
  if (!root.ok()) return root.status();
  Emu3Config c;
  const std::string model_type = root->value("model_type", std::string());
  if (model_type == "Emu3") {
    c.layout = Emu3Layout::kBaai;
    if (absl::Status s = ReadDecoder(*root, file, c); !s.ok()) return s;
    JsonFields f(*root, file);
    for (auto [key, out] : {std::pair{"img_token_id", &c.img_token_id}, std::pair{"boi_token_id", &c.boi_token_id},
                            std::pair{"eoi_token_id", &c.eoi_token_id}, std::pair{"eol_token_id", &c.eol_token_id},
                            std::pair{"eof_token_id", &c.eof_token_id}, std::pair{"image_area", &c.image_area}}) {
      if (absl::Status s = f.Int(key, out, /*required=*/false); !s.ok()) return s;
    }
  } else if (model_type == "emu3") {
    c.layout = Emu3Layout::kTransformers;
    auto text_config = root->find("text_config");
    if (text_config == root->end() || !text_config->is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": missing object 'text_config'"));
    }
    if (absl::Status s = ReadDecoder(*text_config, file + " text_config", c); !s.ok()) return s;
    auto vq = root->find("vq_config");
    if (vq == root->end() || !vq->is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": missing object 'vq_config'"));
    }
    absl::StatusOr<emu3vq::Emu3VqConfig> vq_config = emu3vq::ParseHfVqConfig(*vq, file + " vq_config");
    if (!vq_config.ok()) return vq_config.status();
    c.vq = *vq_config;
    if (absl::Status s = JsonFields(*root, file).Int("image_area", &c.image_area, false); !s.ok()) return s;
    if (absl::Status s = JsonFields(*root, file).Is("tie_word_embeddings", false, "Emu3's lm_head is its own tensor");
        !s.ok()) {
      return s;
    }
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": model_type '", model_type, "' is not Emu3's ('Emu3' BAAI, 'emu3' transformers)"));
  }
  if (c.image_area <= 0) return absl::InvalidArgumentError(absl::StrCat(file, ": field 'image_area' must be positive"));
  return c;
}

absl::StatusOr<Emu3Config> LoadEmu3Config(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  absl::StatusOr<std::string> text = families::ReadTextFile(path);
  if (!text.ok()) return text.status();
  return ParseEmu3Config(*text, path);
}

absl::StatusOr<emu3vq::Emu3VqConfig> LoadBaaiVisionConfig(const std::string& vision_dir) {
  const std::string path = (std::filesystem::path(vision_dir) / "config.json").string();
  absl::StatusOr<std::string> text = families::ReadTextFile(path);
  if (!text.ok()) {
    return absl::NotFoundError(absl::StrCat(text.status().message(),
                                            " (the Emu3 vision tokenizer, BAAI/Emu3-VisionTokenizer: set the family "
                                            "option vision_tokenizer_dir to its directory)"));
  }
  absl::StatusOr<json> root = families::ParseJsonObject(*text, path);
  if (!root.ok()) return root.status();
  const std::string model_type = root->value("model_type", std::string());
  if (model_type != "Emu3VisionVQ") {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": model_type '", model_type, "' is not Emu3's vision tokenizer ('Emu3VisionVQ')"));
  }
  return emu3vq::ParseBaaiVqConfig(*root, path);
}

}  // namespace argen::emu3
