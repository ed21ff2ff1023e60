#include "engine/families/janus/janus_config.h"

#include <filesystem>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/families/json_fields.h"
#include "nlohmann/json.hpp"

namespace argen::janus {
namespace {

using nlohmann::json;

// Errors name the file and the dotted path of the field.
using Fields = families::JsonFields;

constexpr char kPositiveList[] = "must be a non-empty array of positive integers";

#define ARGEN_RETURN_IF_ERROR(expr)           \
  do {                                        \
    if (absl::Status s_ = (expr); !s_.ok()) { \
      return s_;                              \
    }                                         \
  } while (0)

absl::Status ParseLanguage(const Fields& f, LanguageConfig& c) {
  ARGEN_RETURN_IF_ERROR(f.PositiveInt("hidden_size", &c.hidden_size, true));
  ARGEN_RETURN_IF_ERROR(f.PositiveInt("intermediate_size", &c.intermediate_size, true));
  ARGEN_RETURN_IF_ERROR(f.PositiveInt("num_hidden_layers", &c.num_hidden_layers, true));
  ARGEN_RETURN_IF_ERROR(f.PositiveInt("num_attention_heads", &c.num_attention_heads, true));
  ARGEN_RETURN_IF_ERROR(f.PositiveInt("vocab_size", &c.vocab_size, true));
  c.num_key_value_heads = c.num_attention_heads;
  ARGEN_RETURN_IF_ERROR(f.PositiveInt("num_key_value_heads", &c.num_key_value_heads, false));
  ARGEN_RETURN_IF_ERROR(f.PositiveInt("max_position_embeddings", &c.max_position_embeddings, false));
  ARGEN_RETURN_IF_ERROR(f.Positive("rms_norm_eps", &c.rms_norm_eps));
  ARGEN_RETURN_IF_ERROR(f.Positive("rope_theta", &c.rope_theta));
  ARGEN_RETURN_IF_ERROR(f.String("dtype", &c.torch_dtype));  // newer transformers
  ARGEN_RETURN_IF_ERROR(f.String("torch_dtype", &c.torch_dtype));

  if (f.Get("head_dim") != nullptr) {
    ARGEN_RETURN_IF_ERROR(f.PositiveInt("head_dim", &c.head_dim, true));
  } else if (c.hidden_size % c.num_attention_heads != 0) {
    return f.Error("num_attention_heads",
                   absl::StrCat("(", c.num_attention_heads, ") must divide hidden_size (", c.hidden_size, ")"));
  } else {
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.head_dim % 2 != 0) return f.Error("head_dim", absl::StrCat("is ", c.head_dim, ", RoPE needs it even"));
  if (c.num_attention_heads % c.num_key_value_heads != 0) {
    return f.Error(
        "num_key_value_heads",
        absl::StrCat("(", c.num_key_value_heads, ") must divide num_attention_heads (", c.num_attention_heads, ")"));
  }

  // Variants of the Llama family this engine does not implement: refuse them
  // rather than compute something else.
  std::string text;
  ARGEN_RETURN_IF_ERROR(f.String("model_type", &text));
  if (!text.empty() && text != "llama") return f.Error("model_type", absl::StrCat("is '", text, "', expected 'llama'"));
  text.clear();
  ARGEN_RETURN_IF_ERROR(f.String("hidden_act", &text));
  if (!text.empty() && text != "silu")
    return f.Error("hidden_act", absl::StrCat("is '", text, "', only 'silu' is supported"));
  bool flag = false;
  ARGEN_RETURN_IF_ERROR(f.Bool("attention_bias", &flag));
  if (flag) return f.Error("attention_bias", "is true, which is not supported");
  ARGEN_RETURN_IF_ERROR(f.Bool("mlp_bias", &flag));
  if (flag) return f.Error("mlp_bias", "is true, which is not supported");
  if (f.Get("rope_scaling") != nullptr) return f.Error("rope_scaling", "is set, which is not supported");
  return absl::OkStatus();
}

absl::Status ParseGenVision(const Fields& f, vq::Vq16Config& c) {
  ARGEN_RETURN_IF_ERROR(f.Expect("cls", "VQ-16", &c.cls));
  auto p = f.Object("params");
  if (!p.ok()) return p.status();
  ARGEN_RETURN_IF_ERROR(p->PositiveInt("image_token_size", &c.image_token_size, true));
  ARGEN_RETURN_IF_ERROR(p->PositiveInt("n_embed", &c.n_embed, true));
  // Extension keys (absent from official checkpoints): the VQ-16 architecture.
  c.codebook_size = c.image_token_size;
  ARGEN_RETURN_IF_ERROR(p->PositiveInt("codebook_size", &c.codebook_size, false));
  ARGEN_RETURN_IF_ERROR(p->PositiveInt("codebook_embed_dim", &c.codebook_embed_dim, false));
  ARGEN_RETURN_IF_ERROR(p->Bool("codebook_l2_norm", &c.codebook_l2_norm));
  ARGEN_RETURN_IF_ERROR(p->PositiveInt("ch", &c.ch, false));
  ARGEN_RETURN_IF_ERROR(p->SmallIntList("decoder_ch_mult", kPositiveList, &c.ch_mult));
  ARGEN_RETURN_IF_ERROR(p->SmallIntList("ch_mult", kPositiveList, &c.ch_mult));
  ARGEN_RETURN_IF_ERROR(p->PositiveInt("z_channels", &c.z_channels, false));
  ARGEN_RETURN_IF_ERROR(p->PositiveInt("num_res_blocks", &c.num_res_blocks, false));
  ARGEN_RETURN_IF_ERROR(p->PositiveInt("image_size", &c.image_size, false));

  if (c.codebook_size != c.image_token_size) {
    return p->Error("codebook_size", absl::StrCat("(", c.codebook_size, ") must equal image_token_size (",
                                                  c.image_token_size, "): sampled tokens index the codebook"));
  }
  if (c.ch_mult.size() > 10) return p->Error("ch_mult", "has more than 10 levels");
  if (c.image_size % c.downsample() != 0) {
    return p->Error("image_size", absl::StrCat("(", c.image_size, ") must be a multiple of the VQ downsampling ",
                                               c.downsample(), " (2^(len(ch_mult)-1))"));
  }
  for (int32_t m : c.ch_mult) {
    if ((c.ch * m) % c.num_groups != 0) {
      return p->Error("ch", absl::StrCat("times every ch_mult entry must be a multiple of ", c.num_groups,
                                         " (GroupNorm groups); got ", c.ch * m));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseGenAligner(const Fields& f, GenAlignerConfig& c) {
  ARGEN_RETURN_IF_ERROR(f.Expect("cls", "MlpProjector", &c.cls));
  auto p = f.Object("params");
  if (!p.ok()) return p.status();
  ARGEN_RETURN_IF_ERROR(p->Expect("projector_type", "mlp_gelu", &c.projector_type));
  ARGEN_RETURN_IF_ERROR(p->PositiveInt("depth", &c.depth, true));
  ARGEN_RETURN_IF_ERROR(p->PositiveInt("input_dim", &c.input_dim, true));
  ARGEN_RETURN_IF_ERROR(p->PositiveInt("n_embed", &c.n_embed, true));
  return absl::OkStatus();
}

absl::Status ParseGenHead(const Fields& f, GenHeadConfig& c) {
  ARGEN_RETURN_IF_ERROR(f.Expect("cls", "vision_head", &c.cls));
  auto p = f.Object("params");
  if (!p.ok()) return p.status();
  ARGEN_RETURN_IF_ERROR(p->PositiveInt("n_embed", &c.n_embed, true));
  ARGEN_RETURN_IF_ERROR(p->PositiveInt("image_token_embed", &c.image_token_embed, true));
  ARGEN_RETURN_IF_ERROR(p->PositiveInt("image_token_size", &c.image_token_size, true));
  return absl::OkStatus();
}

// The sections must agree where the model wires them together.
absl::Status CrossCheck(const JanusConfig& c, const std::string& file) {
  auto mismatch = [&](const std::string& field, int64_t got, const std::string& other, int64_t want) {
    return absl::InvalidArgumentError(
        absl::StrCat(file, ": field '", field, "' is ", got, " but must equal ", other, " (", want, ")"));
  };
  const int32_t hidden = c.language.hidden_size;
  if (c.gen_aligner.input_dim != c.gen_vision.n_embed) {
    return mismatch("gen_aligner_config.params.input_dim", c.gen_aligner.input_dim, "gen_vision_config.params.n_embed",
                    c.gen_vision.n_embed);
  }
  if (c.gen_aligner.n_embed != hidden) {
    return mismatch("gen_aligner_config.params.n_embed", c.gen_aligner.n_embed, "language_config.hidden_size", hidden);
  }
  if (c.gen_head.n_embed != hidden) {
    return mismatch("gen_head_config.params.n_embed", c.gen_head.n_embed, "language_config.hidden_size", hidden);
  }
  if (c.gen_head.image_token_size != c.gen_vision.image_token_size) {
    return mismatch("gen_head_config.params.image_token_size", c.gen_head.image_token_size,
                    "gen_vision_config.params.image_token_size", c.gen_vision.image_token_size);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<JanusConfig> ParseJanusConfig(const std::string& json_text, const std::string& file) {
  absl::StatusOr<json> parsed = families::ParseJsonObject(json_text, file);
  if (!parsed.ok()) return parsed.status();
  const json& root = *parsed;
  const Fields top(root, file);
  std::string model_type;
  // transformers' own Janus port renames every tensor (convert_janus_weights_to_hf.py); say so.
  if (const auto t = root.find("model_type"); t != root.end() && *t == "janus") {
    return absl::UnimplementedError(absl::StrCat(
        file,
        ": model_type 'janus' is the transformers-native layout (deepseek-community/Janus-Pro-*: tensors "
        "model.language_model.*, model.vqmodel.*, model.generation_*), whose names argen does not map; use "
        "the original deepseek-ai/Janus-Pro-* repository (model_type 'multi_modality')"));
  }
  ARGEN_RETURN_IF_ERROR(top.Expect("model_type", "multi_modality", &model_type));

  JanusConfig config;
  ARGEN_RETURN_IF_ERROR(top.String("argen_system_prompt", &config.system_prompt));
  auto language = top.Object("language_config");
  if (!language.ok()) return language.status();
  ARGEN_RETURN_IF_ERROR(ParseLanguage(*language, config.language));
  auto gen_vision = top.Object("gen_vision_config");
  if (!gen_vision.ok()) return gen_vision.status();
  ARGEN_RETURN_IF_ERROR(ParseGenVision(*gen_vision, config.gen_vision));
  auto gen_aligner = top.Object("gen_aligner_config");
  if (!gen_aligner.ok()) return gen_aligner.status();
  ARGEN_RETURN_IF_ERROR(ParseGenAligner(*gen_aligner, config.gen_aligner));
  auto gen_head = top.Object("gen_head_config");
  if (!gen_head.ok()) return gen_head.status();
  ARGEN_RETURN_IF_ERROR(ParseGenHead(*gen_head, config.gen_head));
  ARGEN_RETURN_IF_ERROR(CrossCheck(config, file));
  return config;
}

absl::StatusOr<JanusConfig> LoadJanusConfig(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  absl::StatusOr<std::string> text = families::ReadTextFile(path);
  if (!text.ok()) return text.status();
  return ParseJanusConfig(*text, path);
}

}  // namespace argen::janus
