#include "engine/families/lumina/lumina_config.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace argen::lumina {
namespace {

using nlohmann::json;

absl::Status Bad(const std::string& file, const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(file, ": field '", field, "' ", why));
}

// An optional integer field (absent or null: *out unchanged).
absl::Status Int(const json& root, const std::string& file, const char* field, int32_t* out, bool required) {
  auto it = root.find(field);
  if (it == root.end() || it->is_null()) {
    return required ? Bad(file, field, "is required") : absl::OkStatus();
  }
  if (!it->is_number_integer()) return Bad(file, field, "must be an integer");
  const int64_t v = it->get<int64_t>();
  if (v <= 0 || v > std::numeric_limits<int32_t>::max())
    return Bad(file, field, absl::StrCat("must be positive, got ", v));
  *out = static_cast<int32_t>(v);
  return absl::OkStatus();
}

absl::Status Number(const json& root, const std::string& file, const char* field, double* out) {
  auto it = root.find(field);
  if (it == root.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number()) return Bad(file, field, "must be a number");
  const double v = it->get<double>();
  if (!(v > 0)) return Bad(file, field, absl::StrCat("must be positive, got ", v));
  *out = v;
  return absl::OkStatus();
}

absl::Status Bool(const json& root, const std::string& file, const char* field, bool* out) {
  auto it = root.find(field);
  if (it == root.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_boolean()) return Bad(file, field, "must be true or false");
  *out = it->get<bool>();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LuminaConfig> ParseLuminaConfig(const std::string& json_text, const std::string& file) {
  const json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(file, ": malformed JSON"));
  if (!root.is_object()) return absl::InvalidArgumentError(absl::StrCat(file, ": top level is not a JSON object"));
  auto type = root.find("model_type");
  if (type == root.end() || !type->is_string() || type->get<std::string>() != "chameleon") {
    return Bad(file, "model_type", "must be \"chameleon\" (a Lumina-mGPT / Chameleon checkpoint)");
  }
  LuminaConfig c;
  for (auto [field, out, required] : {std::tuple{"hidden_size", &c.hidden_size, true},
                                      {"intermediate_size", &c.intermediate_size, true},
                                      {"num_hidden_layers", &c.num_hidden_layers, true},
                                      {"num_attention_heads", &c.num_attention_heads, true},
                                      {"num_key_value_heads", &c.num_key_value_heads, false},
                                      {"head_dim", &c.head_dim, false},
                                      {"vocab_size", &c.vocab_size, true},
                                      {"max_position_embeddings", &c.max_position_embeddings, false},
                                      {"model_parallel_size", &c.model_parallel_size, false}}) {
    if (absl::Status s = Int(root, file, field, out, required); !s.ok()) return s;
  }
  if (c.num_key_value_heads == 0) c.num_key_value_heads = c.num_attention_heads;
  if (c.head_dim == 0) c.head_dim = c.hidden_size / c.num_attention_heads;
  if (absl::Status s = Number(root, file, "rms_norm_eps", &c.rms_norm_eps); !s.ok()) return s;
  if (absl::Status s = Number(root, file, "rope_theta", &c.rope_theta); !s.ok()) return s;
  if (auto rp = root.find("rope_parameters"); rp != root.end() && rp->is_object()) {
    if (absl::Status s = Number(*rp, file + " rope_parameters", "rope_theta", &c.rope_theta); !s.ok()) return s;
  }
  if (auto rs = root.find("rope_scaling"); rs != root.end() && !rs->is_null()) {
    return Bad(file, "rope_scaling", "must be null (argen runs plain 1-D RoPE)");
  }
  for (const char* field : {"attention_bias", "mlp_bias"}) {
    bool on = false;
    if (absl::Status s = Bool(root, file, field, &on); !s.ok()) return s;
    if (on) return Bad(file, field, "must be false (the Chameleon stack has no biases)");
  }
  if (absl::Status s = Bool(root, file, "swin_norm", &c.swin_norm); !s.ok()) return s;
  if (absl::Status s = Bool(root, file, "tie_word_embeddings", &c.tie_word_embeddings); !s.ok()) return s;

  auto vm = root.find("vocabulary_map");
  if (vm == root.end() || !vm->is_object() || vm->empty()) {
    return Bad(file, "vocabulary_map", "is required: an object of token name -> id (where the image tokens are)");
  }
  for (auto it = vm->begin(); it != vm->end(); ++it) {
    if (!it.value().is_number_integer()) return Bad(file, "vocabulary_map." + it.key(), "must be an integer id");
    const int64_t id = it.value().get<int64_t>();
    if (id < 0 || id >= c.vocab_size) {
      return Bad(file, "vocabulary_map." + it.key(), absl::StrCat("id ", id, " is outside vocab_size ", c.vocab_size));
    }
    c.vocabulary_map.emplace_back(it.key(), static_cast<int32_t>(id));
  }
  std::sort(c.vocabulary_map.begin(), c.vocabulary_map.end(),
            [](const auto& a, const auto& b) { return a.second < b.second; });

  if (auto sizes = root.find("argen_image_sizes"); sizes != root.end() && !sizes->is_null()) {
    if (!sizes->is_array() || sizes->empty())
      return Bad(file, "argen_image_sizes", "must be a non-empty list of [W, H]");
    for (const json& s : *sizes) {
      if (!s.is_array() || s.size() != 2 || !s[0].is_number_integer() || !s[1].is_number_integer() ||
          s[0].get<int64_t>() <= 0 || s[1].get<int64_t>() <= 0 || s[0].get<int64_t>() % 32 != 0 ||
          s[1].get<int64_t>() % 32 != 0 || s[0].get<int64_t>() > 16384 || s[1].get<int64_t>() > 16384) {
        return Bad(file, "argen_image_sizes", "entries must be [W, H], positive multiples of 32");
      }
      c.image_sizes.emplace_back(s[0].get<int32_t>(), s[1].get<int32_t>());
    }
  }
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    return Bad(file, "num_attention_heads",
               absl::StrCat("(", c.num_attention_heads, ") must be a multiple of num_key_value_heads (",
                            c.num_key_value_heads, ")"));
  }
  if (c.head_dim % 2 != 0) return Bad(file, "head_dim", absl::StrCat("must be even for RoPE, got ", c.head_dim));
  return c;
}

absl::StatusOr<LuminaConfig> LoadLuminaConfig(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::ostringstream text;
  text << in.rdbuf();
  return ParseLuminaConfig(text.str(), path);
}

}  // namespace argen::lumina
