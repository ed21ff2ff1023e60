// config.json parsing: the tiny checkpoints, a config with the published
// Janus-Pro-1B keys and values (defaults for the VQ-16 architecture), and every
// malformed-config error naming file and field.
#include "engine/families/janus/janus_config.h"

#include "engine/checkpoint/tests/test_files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace argen::janus {
namespace {

using checkpoint::testing::TinyCheckpoint;
using nlohmann::json;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The published deepseek-ai/Janus-Pro-1B config.json (its keys and values; the
// file has no rms_norm_eps / rope_theta / VQ architecture keys).
json JanusPro1B() {
  return json::parse(R"({
    "aligner_config": {"cls": "MlpProjector", "model_type": "aligner",
                       "params": {"depth": 2, "input_dim": 1024, "n_embed": 2048, "projector_type": "mlp_gelu"}},
    "gen_aligner_config": {"cls": "MlpProjector", "model_type": "gen_aligner",
                           "params": {"depth": 2, "input_dim": 8, "n_embed": 2048, "projector_type": "mlp_gelu"}},
    "gen_head_config": {"cls": "vision_head", "model_type": "gen_head",
                        "params": {"image_token_embed": 2048, "image_token_size": 16384, "n_embed": 2048}},
    "gen_vision_config": {"cls": "VQ-16", "model_type": "gen_vision",
                          "params": {"image_token_size": 16384, "n_embed": 8}},
    "language_config": {"hidden_size": 2048, "intermediate_size": 5632, "max_position_embeddings": 16384,
                        "model_type": "llama", "num_attention_heads": 16, "num_hidden_layers": 24,
                        "num_key_value_heads": 16, "torch_dtype": "bfloat16", "vocab_size": 102400},
    "model_type": "multi_modality",
    "torch_dtype": "bfloat16",
    "transformers_version": "4.33.1",
    "vision_config": {"cls": "CLIPVisionTower", "model_type": "vision",
                      "params": {"image_size": 384, "model_name": "siglip_large_patch16_384",
                                 "select_feature": "same", "select_layer": -1}}
  })");
}

absl::StatusOr<JanusConfig> Parse(const json& j) { return ParseJanusConfig(j.dump(), "/models/x/config.json"); }

std::string ErrorOf(const json& j) {
  auto c = Parse(j);
  EXPECT_FALSE(c.ok());
  return c.ok() ? "" : std::string(c.status().message());
}

TEST(JanusConfig, OfficialJanusPro1BUsesOfficialDefaults) {
  auto c = Parse(JanusPro1B());
  ASSERT_TRUE(c.ok()) << c.status();
  const LanguageConfig& l = c->language;
  EXPECT_EQ(l.hidden_size, 2048);
  EXPECT_EQ(l.intermediate_size, 5632);
  EXPECT_EQ(l.num_hidden_layers, 24);
  EXPECT_EQ(l.num_attention_heads, 16);
  EXPECT_EQ(l.num_key_value_heads, 16);
  EXPECT_EQ(l.head_dim, 128);
  EXPECT_EQ(l.vocab_size, 102400);
  EXPECT_EQ(l.max_position_embeddings, 16384);
  EXPECT_DOUBLE_EQ(l.rms_norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(l.rope_theta, 10000.0);
  EXPECT_EQ(l.torch_dtype, "bfloat16");
  const vq::Vq16Config& v = c->gen_vision;
  EXPECT_EQ(v.image_token_size, 16384);
  EXPECT_EQ(v.codebook_size, 16384);
  EXPECT_EQ(v.codebook_embed_dim, 8);
  EXPECT_TRUE(v.codebook_l2_norm);
  EXPECT_EQ(v.ch, 128);
  EXPECT_THAT(v.ch_mult, ElementsAre(1, 1, 2, 2, 4));
  EXPECT_EQ(v.z_channels, 256);
  EXPECT_EQ(v.num_res_blocks, 2);
  EXPECT_EQ(v.image_size, 384);
  EXPECT_EQ(v.downsample(), 16);
  EXPECT_EQ(v.token_grid(), 24);
  EXPECT_EQ(v.image_tokens(), 576);
  EXPECT_EQ(c->gen_aligner.depth, 2);
  EXPECT_EQ(c->gen_aligner.input_dim, 8);
  EXPECT_EQ(c->gen_head.image_token_embed, 2048);
}

TEST(JanusConfig, KvHeadsDefaultToHeadsAndDtypeKeyOfNewerTransformers) {
  json j = JanusPro1B();
  j["language_config"].erase("num_key_value_heads");
  j["language_config"].erase("torch_dtype");
  j["language_config"]["dtype"] = "float16";
  j["language_config"]["rms_norm_eps"] = 1e-5;
  j["language_config"]["rope_theta"] = 500000;
  auto c = Parse(j);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->language.num_key_value_heads, 16);
  EXPECT_EQ(c->language.torch_dtype, "float16");
  EXPECT_DOUBLE_EQ(c->language.rms_norm_eps, 1e-5);
  EXPECT_DOUBLE_EQ(c->language.rope_theta, 500000.0);
}

TEST(JanusConfig, TinyCheckpointsUseExtensionKeys) {
  for (const auto& [variant, kv] : {std::pair<std::string, int>{"tiny-mha", 4}, {"tiny-gqa-sharded", 2}}) {
    SCOPED_TRACE(variant);
    auto c = LoadJanusConfig(TinyCheckpoint(variant));
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->language.hidden_size, 64);
    EXPECT_EQ(c->language.num_hidden_layers, 2);
    EXPECT_EQ(c->language.num_attention_heads, 4);
    EXPECT_EQ(c->language.num_key_value_heads, kv);
    EXPECT_EQ(c->language.head_dim, 16);
    EXPECT_EQ(c->language.intermediate_size, 160);
    EXPECT_EQ(c->language.vocab_size, 512);
    EXPECT_EQ(c->gen_vision.image_token_size, 64);
    EXPECT_EQ(c->gen_vision.ch, 32);
    EXPECT_THAT(c->gen_vision.ch_mult, ElementsAre(1, 1, 2));
    EXPECT_EQ(c->gen_vision.z_channels, 32);
    EXPECT_EQ(c->gen_vision.num_res_blocks, 1);
    EXPECT_EQ(c->gen_vision.image_size, 32);
    EXPECT_EQ(c->gen_vision.token_grid(), 8);
  }
}

// argen_system_prompt (extension key): absent in the official configs (the
// official prompt), a string when a model was trained with one.
TEST(JanusConfig, SystemPromptExtensionKey) {
  auto official = Parse(JanusPro1B());
  ASSERT_TRUE(official.ok()) << official.status();
  EXPECT_EQ(official->system_prompt, "");
  json j = JanusPro1B();
  j["argen_system_prompt"] = "You are a helpful assistant.";
  auto with = Parse(j);
  ASSERT_TRUE(with.ok()) << with.status();
  EXPECT_EQ(with->system_prompt, "You are a helpful assistant.");
  j["argen_system_prompt"] = 7;
  EXPECT_THAT(ErrorOf(j), AllOf(HasSubstr("'argen_system_prompt'"), HasSubstr("string")));
}

TEST(JanusConfig, MalformedJsonNamesFile) {
  auto c = ParseJanusConfig("{\"model_type\": \"multi_modality\",", "/models/x/config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), AllOf(HasSubstr("/models/x/config.json"), HasSubstr("malformed")));
}

TEST(JanusConfig, MissingFileNamesPath) {
  auto c = LoadJanusConfig("/nonexistent-model-dir");
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("/nonexistent-model-dir/config.json"));
}

TEST(JanusConfig, MissingFieldsAreNamed) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"language_config"}, "language_config"},
      {{"gen_head_config"}, "gen_head_config"},
      {{"model_type"}, "model_type"},
      {{"language_config", "hidden_size"}, "language_config.hidden_size"},
      {{"language_config", "vocab_size"}, "language_config.vocab_size"},
      {{"gen_vision_config", "params"}, "gen_vision_config.params"},
      {{"gen_vision_config", "params", "image_token_size"}, "gen_vision_config.params.image_token_size"},
      {{"gen_aligner_config", "params", "depth"}, "gen_aligner_config.params.depth"},
      {{"gen_head_config", "params", "image_token_embed"}, "gen_head_config.params.image_token_embed"},
      {{"gen_aligner_config", "cls"}, "gen_aligner_config.cls"},
  };
  for (const auto& [path, field] : cases) {
    json j = JanusPro1B();
    json* parent = &j;
    for (size_t i = 0; i + 1 < path.size(); ++i) parent = &(*parent)[path[i]];
    parent->erase(path.back());
    EXPECT_THAT(ErrorOf(j),
                AllOf(HasSubstr("/models/x/config.json"), HasSubstr("'" + field + "'"), HasSubstr("missing")));
  }
}

TEST(JanusConfig, WrongTypesAreNamed) {
  json j = JanusPro1B();
  j["language_config"]["hidden_size"] = "2048";
  EXPECT_THAT(ErrorOf(j), AllOf(HasSubstr("'language_config.hidden_size'"), HasSubstr("integer")));
  j = JanusPro1B();
  j["language_config"]["rms_norm_eps"] = "tiny";
  EXPECT_THAT(ErrorOf(j), AllOf(HasSubstr("'language_config.rms_norm_eps'"), HasSubstr("number")));
  j = JanusPro1B();
  j["gen_vision_config"]["params"]["codebook_l2_norm"] = 1;
  EXPECT_THAT(ErrorOf(j), HasSubstr("'gen_vision_config.params.codebook_l2_norm'"));
  j = JanusPro1B();
  j["gen_vision_config"]["params"]["ch_mult"] = json::array({1, "2"});
  EXPECT_THAT(ErrorOf(j), HasSubstr("'gen_vision_config.params.ch_mult'"));
  j = JanusPro1B();
  j["language_config"] = json::array();
  EXPECT_THAT(ErrorOf(j), AllOf(HasSubstr("'language_config'"), HasSubstr("object")));
  j = JanusPro1B();
  j["language_config"]["num_hidden_layers"] = 0;
  EXPECT_THAT(ErrorOf(j), HasSubstr("'language_config.num_hidden_layers'"));
  j = JanusPro1B();
  j["language_config"]["num_attention_heads"] = 2.5;
  EXPECT_THAT(ErrorOf(j), HasSubstr("'language_config.num_attention_heads'"));
}

TEST(JanusConfig, UnsupportedVariantsAreRefusedByField) {
  json j = JanusPro1B();
  j["model_type"] = "llava";
  EXPECT_THAT(ErrorOf(j), AllOf(HasSubstr("'model_type'"), HasSubstr("multi_modality")));
  j = JanusPro1B();
  j["gen_vision_config"]["cls"] = "VQ-8";
  EXPECT_THAT(ErrorOf(j), AllOf(HasSubstr("'gen_vision_config.cls'"), HasSubstr("VQ-8")));
  j = JanusPro1B();
  j["gen_aligner_config"]["params"]["projector_type"] = "linear";
  EXPECT_THAT(ErrorOf(j), HasSubstr("'gen_aligner_config.params.projector_type'"));
  j = JanusPro1B();
  j["language_config"]["rope_scaling"] = {{"type", "linear"}, {"factor", 2.0}};
  EXPECT_THAT(ErrorOf(j), HasSubstr("'language_config.rope_scaling'"));
  j = JanusPro1B();
  j["language_config"]["hidden_act"] = "gelu";
  EXPECT_THAT(ErrorOf(j), HasSubstr("'language_config.hidden_act'"));
  j = JanusPro1B();
  j["language_config"]["rope_scaling"] = nullptr;  // null means absent, as HF writes it
  EXPECT_TRUE(Parse(j).ok());
}

TEST(JanusConfig, TransformersNativeJanusIsRefusedSayingWhy) {
  // deepseek-community/Janus-Pro-* (transformers' JanusForConditionalGeneration): other tensor names.
  const json j = json::parse(R"({"model_type": "janus", "text_config": {"hidden_size": 2048},
                                 "vq_config": {"num_embeddings": 16384}, "vision_config": {}})");
  EXPECT_THAT(ErrorOf(j), AllOf(HasSubstr("model_type 'janus'"), HasSubstr("deepseek-community"),
                                HasSubstr("deepseek-ai/Janus-Pro"), HasSubstr("does not map")));
}

TEST(JanusConfig, InconsistentSectionsNameBothFields) {
  json j = JanusPro1B();
  j["gen_head_config"]["params"]["n_embed"] = 1024;
  EXPECT_THAT(ErrorOf(j), AllOf(HasSubstr("gen_head_config.params.n_embed"), HasSubstr("language_config.hidden_size")));
  j = JanusPro1B();
  j["gen_aligner_config"]["params"]["input_dim"] = 16;
  EXPECT_THAT(ErrorOf(j),
              AllOf(HasSubstr("gen_aligner_config.params.input_dim"), HasSubstr("gen_vision_config.params.n_embed")));
  j = JanusPro1B();
  j["gen_head_config"]["params"]["image_token_size"] = 8192;
  EXPECT_THAT(ErrorOf(j), HasSubstr("gen_head_config.params.image_token_size"));
  j = JanusPro1B();
  j["gen_vision_config"]["params"]["codebook_size"] = 8192;
  EXPECT_THAT(ErrorOf(j), HasSubstr("gen_vision_config.params.codebook_size"));
  j = JanusPro1B();
  j["gen_vision_config"]["params"]["image_size"] = 200;  // not a multiple of 16
  EXPECT_THAT(ErrorOf(j), HasSubstr("gen_vision_config.params.image_size"));
  j = JanusPro1B();
  j["gen_vision_config"]["params"]["ch"] = 48;  // 48 channels: not a multiple of 32 groups
  EXPECT_THAT(ErrorOf(j), HasSubstr("gen_vision_config.params.ch"));
  j = JanusPro1B();
  j["language_config"]["num_key_value_heads"] = 3;
  EXPECT_THAT(ErrorOf(j), HasSubstr("language_config.num_key_value_heads"));
  j = JanusPro1B();
  j["language_config"]["num_attention_heads"] = 15;
  EXPECT_THAT(ErrorOf(j), HasSubstr("language_config.num_attention_heads"));
}

}  // namespace
}  // namespace argen::janus
