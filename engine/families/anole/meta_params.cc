#include "engine/families/anole/meta_params.h"

#include <fstream>
#include <limits>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace argen::anole {
namespace {

using nlohmann::json;

absl::Status Bad(const std::string& file, const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat(file, ": field '", field, "' ", why));
}

// A positive integer field; absent or null: *out unchanged (an error when required).
absl::Status Int(const json& o, const std::string& file, const char* field, int32_t* out, bool required) {
  auto it = o.find(field);
  if (it == o.end() || it->is_null()) return required ? Bad(file, field, "is required") : absl::OkStatus();
  if (!it->is_number_integer()) return Bad(file, field, "must be an integer");
  const int64_t v = it->get<int64_t>();
  if (v <= 0 || v > std::numeric_limits<int32_t>::max()) {
    return Bad(file, field, absl::StrCat("must be positive, got ", v));
  }
  *out = static_cast<int32_t>(v);
  return absl::OkStatus();
}

absl::Status Number(const json& o, const std::string& file, const char* field, double* out, bool required) {
  auto it = o.find(field);
  if (it == o.end() || it->is_null()) return required ? Bad(file, field, "is required") : absl::OkStatus();
  if (!it->is_number()) return Bad(file, field, "must be a number");
  const double v = it->get<double>();
  if (!(v > 0)) return Bad(file, field, absl::StrCat("must be positive, got ", v));
  *out = v;
  return absl::OkStatus();
}

absl::Status Bool(const json& o, const std::string& file, const char* field, bool* out) {
  auto it = o.find(field);
  if (it == o.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_boolean()) return Bad(file, field, "must be true or false");
  *out = it->get<bool>();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<lumina::LuminaConfig> ParseMetaParams(const std::string& json_text, const std::string& file) {
  const json root = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(file, ": malformed JSON"));
  if (!root.is_object()) return absl::InvalidArgumentError(absl::StrCat(file, ": top level is not a JSON object"));
  int32_t model_parallel = 1;
  if (absl::Status s = Int(root, file, "model_parallel_size", &model_parallel, false); !s.ok()) return s;
  if (model_parallel != 1) {
    return Bad(file, "model_parallel_size",
               absl::StrCat("is ", model_parallel,
                            ": argen reads one consolidated.pth (Chameleon-7B / Anole-7b), "
                            "not a checkpoint sharded over model-parallel ranks"));
  }
  const json* p = &root;
  std::string where = file;
  if (auto it = root.find("model"); it != root.end()) {
    if (!it->is_object()) return Bad(file, "model", "must be an object of the model's parameters");
    p = &*it;
    where = file + " model";
  }
  lumina::LuminaConfig c;
  int32_t multiple_of = 256;
  double ffn_multiplier = 1.0;
  c.vocab_size = kMetaDefaultVocabSize;
  for (auto [field, out, required] : {std::tuple{"dim", &c.hidden_size, true},
                                      {"n_layers", &c.num_hidden_layers, true},
                                      {"n_heads", &c.num_attention_heads, true},
                                      {"n_kv_heads", &c.num_key_value_heads, false},
                                      {"vocab_size", &c.vocab_size, false},
                                      {"multiple_of", &multiple_of, false}}) {
    if (absl::Status s = Int(*p, where, field, out, required); !s.ok()) return s;
  }
  if (absl::Status s = Number(*p, where, "norm_eps", &c.rms_norm_eps, true); !s.ok()) return s;
  if (absl::Status s = Number(*p, where, "rope_theta", &c.rope_theta, false); !s.ok()) return s;
  if (absl::Status s = Number(*p, where, "ffn_dim_multiplier", &ffn_multiplier, false); !s.ok()) return s;
  if (absl::Status s = Bool(*p, where, "swin_norm", &c.swin_norm); !s.ok()) return s;
  bool qk_norm = true;
  if (absl::Status s = Bool(*p, where, "qk_normalization", &qk_norm); !s.ok()) return s;
  if (!qk_norm) return Bad(where, "qk_normalization", "must be true (Chameleon normalises q and k per head)");
  if (c.num_key_value_heads == 0) c.num_key_value_heads = c.num_attention_heads;
  if (c.hidden_size % c.num_attention_heads != 0) {
    return Bad(where, "dim",
               absl::StrCat("(", c.hidden_size, ") must be a multiple of n_heads (", c.num_attention_heads, ")"));
  }
  c.head_dim = c.hidden_size / c.num_attention_heads;
  if (c.head_dim % 2 != 0) return Bad(where, "dim", absl::StrCat("gives an odd head_dim ", c.head_dim));
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    return Bad(
        where, "n_heads",
        absl::StrCat("(", c.num_attention_heads, ") must be a multiple of n_kv_heads (", c.num_key_value_heads, ")"));
  }
  const int64_t ffn = static_cast<int64_t>(ffn_multiplier * static_cast<double>(int64_t{8} * c.hidden_size / 3));
  const int64_t intermediate = int64_t{multiple_of} * ((ffn + multiple_of - 1) / multiple_of);
  if (intermediate <= 0 || intermediate > std::numeric_limits<int32_t>::max()) {
    return Bad(where, "ffn_dim_multiplier", absl::StrCat("gives an intermediate size of ", intermediate));
  }
  c.intermediate_size = static_cast<int32_t>(intermediate);
  c.max_position_embeddings = c.rope_theta > 10000.0 ? 16384 : 4096;
  c.model_parallel_size = 1;
  return c;
}

absl::StatusOr<lumina::LuminaConfig> LoadMetaParams(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::ostringstream text;
  text << in.rdbuf();
  return ParseMetaParams(text.str(), path);
}

}  // namespace argen::anole
