#include "engine/families/llamagen/t5_config.h"

#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace argen::llamagen {

absl::StatusOr<T5EncoderConfig> LoadT5EncoderConfig(const std::string& t5_dir) {
  const std::string path = (std::filesystem::path(t5_dir) / "config.json").string();
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open (the T5 text encoder's config)"));
  std::ostringstream text;
  text << in.rdbuf();
  const nlohmann::json root = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  }
  auto error = [&path](const std::string& key, const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": field '", key, "' ", what));
  };
  T5EncoderConfig c;
  // Required sizes, then the ones with T5Config's defaults.
  const std::vector<std::pair<const char*, int32_t*>> required = {
      {"vocab_size", &c.vocab_size}, {"d_model", &c.d_model}, {"d_kv", &c.d_kv},
      {"num_heads", &c.num_heads},   {"d_ff", &c.d_ff},       {"num_layers", &c.num_layers}};
  const std::vector<std::pair<const char*, int32_t*>> optional = {
      {"relative_attention_num_buckets", &c.relative_attention_num_buckets},
      {"relative_attention_max_distance", &c.relative_attention_max_distance},
      {"eos_token_id", &c.eos_token_id},
      {"pad_token_id", &c.pad_token_id}};
  for (const auto& [keys, is_required] : {std::make_pair(&required, true), std::make_pair(&optional, false)}) {
    for (const auto& [key, out] : *keys) {
      const auto it = root.find(key);
      if (it == root.end() || it->is_null()) {
        if (is_required) return error(key, "is missing");
        continue;
      }
      if (!it->is_number_integer()) return error(key, "must be an integer");
      const int64_t v = it->get<int64_t>();
      const int64_t min_value = (std::string(key) == "eos_token_id" || std::string(key) == "pad_token_id") ? 0 : 1;
      if (v < min_value || v > std::numeric_limits<int32_t>::max()) {
        return error(key, absl::StrCat("is ", v, ", must be at least ", min_value));
      }
      *out = static_cast<int32_t>(v);
    }
  }
  if (const auto it = root.find("layer_norm_epsilon"); it != root.end() && !it->is_null()) {
    if (!it->is_number() || !(it->get<double>() > 0)) return error("layer_norm_epsilon", "must be a positive number");
    c.layer_norm_epsilon = static_cast<float>(it->get<double>());
  }
  std::string ffn = "relu";  // T5Config's default (the original T5), which LlamaGen's encoders never use
  if (const auto it = root.find("feed_forward_proj"); it != root.end() && !it->is_null()) {
    if (!it->is_string()) return error("feed_forward_proj", "must be a string");
    ffn = it->get<std::string>();
  }
  if (ffn != "gated-gelu") {
    return error("feed_forward_proj",
                 absl::StrCat("is '", ffn, "': only the gated-GELU encoders (T5 v1.1, FLAN-T5) are supported"));
  }
  if (c.relative_attention_num_buckets % 2 != 0 ||
      c.relative_attention_max_distance < c.relative_attention_num_buckets / 2) {
    return error("relative_attention_num_buckets",
                 absl::StrCat("is ", c.relative_attention_num_buckets,
                              ": must be even and at most twice relative_attention_max_distance"));
  }
  if (c.eos_token_id >= c.vocab_size) return error("eos_token_id", "is not below vocab_size");
  return c;
}

}  // namespace argen::llamagen
