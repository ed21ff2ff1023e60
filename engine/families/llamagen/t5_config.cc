#include "engine/families/llamagen/t5_config.h"

#include <filesystem>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/families/json_fields.h"
#include "nlohmann/json.hpp"

namespace argen::llamagen {
namespace {

#define ARGEN_RETURN_IF_ERROR(expr)           \
  do {                                        \
    if (absl::Status s_ = (expr); !s_.ok()) { \
      return s_;                              \
    }                                         \
  } while (0)

absl::Status ReadFields(const families::JsonFields& f, T5EncoderConfig& c) {
  // Required sizes, then the ones with T5Config's defaults.
  ARGEN_RETURN_IF_ERROR(f.PositiveInt("vocab_size", &c.vocab_size, true));
  ARGEN_RETURN_IF_ERROR(f.PositiveInt("d_model", &c.d_model, true));
  ARGEN_RETURN_IF_ERROR(f.PositiveInt("d_kv", &c.d_kv, true));
  ARGEN_RETURN_IF_ERROR(f.PositiveInt("num_heads", &c.num_heads, true));
  ARGEN_RETURN_IF_ERROR(f.PositiveInt("d_ff", &c.d_ff, true));
  ARGEN_RETURN_IF_ERROR(f.PositiveInt("num_layers", &c.num_layers, true));
  ARGEN_RETURN_IF_ERROR(f.PositiveInt("relative_attention_num_buckets", &c.relative_attention_num_buckets, false));
  ARGEN_RETURN_IF_ERROR(f.PositiveInt("relative_attention_max_distance", &c.relative_attention_max_distance, false));
  ARGEN_RETURN_IF_ERROR(f.IntAtLeast("eos_token_id", 0, &c.eos_token_id, false));
  ARGEN_RETURN_IF_ERROR(f.IntAtLeast("pad_token_id", 0, &c.pad_token_id, false));
  double eps = c.layer_norm_epsilon;
  ARGEN_RETURN_IF_ERROR(f.Positive("layer_norm_epsilon", &eps));
  c.layer_norm_epsilon = static_cast<float>(eps);
  std::string ffn = "relu";  // T5Config's default (the original T5), which LlamaGen's encoders never use
  ARGEN_RETURN_IF_ERROR(f.String("feed_forward_proj", &ffn));
  if (ffn != "gated-gelu") {
    return f.Error("feed_forward_proj",
                   absl::StrCat("is '", ffn, "': only the gated-GELU encoders (T5 v1.1, FLAN-T5) are supported"));
  }
  if (c.relative_attention_num_buckets % 2 != 0 ||
      c.relative_attention_max_distance < c.relative_attention_num_buckets / 2) {
    return f.Error("relative_attention_num_buckets",
                   absl::StrCat("is ", c.relative_attention_num_buckets,
                                ": must be even and at most twice relative_attention_max_distance"));
  }
  if (c.eos_token_id >= c.vocab_size) return f.Error("eos_token_id", "is not below vocab_size");
  return absl::OkStatus();
}

#undef ARGEN_RETURN_IF_ERROR

}  // namespace

absl::StatusOr<T5EncoderConfig> LoadT5EncoderConfig(const std::string& t5_dir) {
  const std::string path = (std::filesystem::path(t5_dir) / "config.json").string();
  absl::StatusOr<std::string> text = families::ReadTextFile(path);
  if (!text.ok()) {
    return absl::Status(text.status().code(), absl::StrCat(text.status().message(), " (the T5 text encoder's config)"));
  }
  absl::StatusOr<nlohmann::json> root = families::ParseJsonObject(*text, path);
  if (!root.ok()) return root.status();
  T5EncoderConfig c;
  if (absl::Status s = ReadFields(families::JsonFields(*root, path), c); !s.ok()) return s;
  return c;
}

}  // namespace argen::llamagen
