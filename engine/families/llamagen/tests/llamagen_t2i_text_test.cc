// LlamaGen t2i's text side against the OFFICIAL code
// (tests/goldens/tiny/tiny-llamagen-t2i, made by
// tools/goldens/make_llamagen_t2i_goldens.py): the T5 tokenizer's ids
// (transformers' AutoTokenizer over the same spiece.model, as language/t5.py
// calls it), the T5 encoder's last hidden state (transformers'
// T5EncoderModel, relative position buckets beyond the exact range), the
// caption cleaning (language/t5.py's text_preprocessing), and the
// caption MLP's prefix embeddings of both CFG rows (gpt.py's cap_proj of the
// features and of uncond_embedding's last n rows), relative error 1e-5 in fp32.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "engine/checkpoint/weights_file.h"
#include "engine/families/llamagen/caption_clean.h"
#include "engine/families/llamagen/caption_embedder.h"
#include "engine/families/llamagen/t2i_prompt.h"
#include "engine/families/llamagen/t5_encoder.h"
#include "engine/families/llamagen/t5_tokenizer.h"
#include "gtest/gtest.h"
#include "tests/support/golden_files.h"

namespace argen::llamagen {
namespace {

namespace fs = std::filesystem;
using test_support::ReadF32;
using test_support::ReadJson;
using test_support::RelativeError;
using test_support::SourceDir;

constexpr double kTolerance = 1e-5;
const char kRel[] = "tests/goldens/tiny/tiny-llamagen-t2i";

std::string Dir() { return SourceDir() + "/" + kRel; }
std::string T5Dir() { return Dir() + "/flan-t5-tiny"; }

TEST(T5RelativeBucketTest, MatchesTransformersAtTheBoundaries) {
  // transformers' T5Attention._relative_position_bucket(bidirectional, 32 buckets, max distance 128).
  const std::vector<std::pair<int32_t, int32_t>> expected = {
      {0, 0},   {1, 17},  {7, 23},  {8, 24},   {15, 25},  {16, 26},  {17, 26},   {31, 27},
      {32, 28}, {33, 28}, {63, 29}, {64, 30},  {65, 30},  {127, 31}, {128, 31},  {500, 31},
      {-1, 1},  {-7, 7},  {-8, 8},  {-16, 10}, {-32, 12}, {-64, 14}, {-128, 15}, {-600, 15}};
  for (const auto& [relative, bucket] : expected) {
    EXPECT_EQ(T5RelativeBucket(relative, 32, 128), bucket) << "relative position " << relative;
  }
}

TEST(CaptionCleanTest, MatchesTheOfficialTextPreprocessing) {
  const nlohmann::json golden = ReadJson(std::string(kRel) + "/goldens.json");
  ASSERT_GE(golden["cleaning"].size(), 5u);
  for (const nlohmann::json& pair : golden["cleaning"]) {
    const std::string raw = pair[0].get<std::string>();
    EXPECT_EQ(CleanCaption(raw), pair[1].get<std::string>()) << "caption: " << raw;
  }
  EXPECT_EQ(CleanCaption(golden["prompt"].get<std::string>()), golden["caption"].get<std::string>());
}

TEST(T5TokenizerTest, IdsMatchTheOfficialTokenizerCall) {
  const nlohmann::json golden = ReadJson(std::string(kRel) + "/goldens.json");
  absl::StatusOr<std::unique_ptr<T5Tokenizer>> tok = T5Tokenizer::Open(T5Dir() + "/spiece.model", 1, 120);
  ASSERT_TRUE(tok.ok()) << tok.status();
  absl::StatusOr<std::vector<int32_t>> ids = (*tok)->Encode(golden["caption"].get<std::string>());
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_EQ(*ids, golden["t5_ids"].get<std::vector<int32_t>>());
  // Truncation keeps the </s>: max_length ids at most, the last one eos.
  absl::StatusOr<std::unique_ptr<T5Tokenizer>> short_tok = T5Tokenizer::Open(T5Dir() + "/spiece.model", 1, 5);
  ASSERT_TRUE(short_tok.ok());
  absl::StatusOr<std::vector<int32_t>> cut = (*short_tok)->Encode(golden["caption"].get<std::string>());
  ASSERT_TRUE(cut.ok());
  EXPECT_EQ(*cut, (std::vector<int32_t>{(*ids)[0], (*ids)[1], (*ids)[2], (*ids)[3], 1}));
}

TEST(T5TokenizerTest, ANonModelFileIsNamed) {
  absl::StatusOr<std::unique_ptr<T5Tokenizer>> tok = T5Tokenizer::Open(T5Dir() + "/config.json", 1, 120);
  ASSERT_FALSE(tok.ok());
  EXPECT_NE(tok.status().message().find("config.json"), std::string::npos) << tok.status();
}

TEST(T5EncoderTest, LastHiddenStateMatchesTransformers) {
  const nlohmann::json golden = ReadJson(std::string(kRel) + "/goldens.json");
  absl::StatusOr<std::unique_ptr<T5Encoder>> t5 = T5Encoder::Open(T5Dir());
  ASSERT_TRUE(t5.ok()) << t5.status();
  EXPECT_EQ((*t5)->config().d_model, golden["t5_d_model"].get<int32_t>());
  const std::vector<int32_t> ids = golden["t5_ids"].get<std::vector<int32_t>>();
  ASSERT_GT(ids.size(), 16u);  // reaches the logarithmic buckets
  absl::StatusOr<std::vector<float>> features = (*t5)->Encode(ids);
  ASSERT_TRUE(features.ok()) << features.status();
  const std::vector<float> expected = ReadF32(Dir() + "/t5_features.f32");
  ASSERT_EQ(features->size(), expected.size());
  EXPECT_LT(RelativeError(features->data(), expected), kTolerance);
  // An id outside the vocabulary is refused, not read out of bounds.
  EXPECT_EQ((*t5)->Encode({0, (*t5)->config().vocab_size}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(T5EncoderTest, AConfigMissingAFieldOrWithAnotherFeedForwardIsNamed) {
  absl::StatusOr<T5EncoderConfig> c = LoadT5EncoderConfig(Dir());  // the GPT's config.json: no T5 fields
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("'vocab_size' is missing"), std::string::npos) << c.status();
  const fs::path dir = fs::temp_directory_path() / ("t5_relu_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  nlohmann::json config = ReadJson(std::string(kRel) + "/flan-t5-tiny/config.json");
  config["feed_forward_proj"] = "relu";  // the original T5's
  std::ofstream(dir / "config.json") << config.dump();
  c = LoadT5EncoderConfig(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("'feed_forward_proj' is 'relu'"), std::string::npos) << c.status();
  fs::remove_all(dir);
}

// A field of the wrong type (or out of range) is INVALID_ARGUMENT naming the
// file, the field and what it must be; the unchanged config reads.
TEST(T5EncoderTest, AFieldOfTheWrongTypeIsNamedWithWhatItMustBe) {
  const nlohmann::json good = ReadJson(std::string(kRel) + "/flan-t5-tiny/config.json");
  const fs::path dir = fs::temp_directory_path() / ("t5_types_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string path = (dir / "config.json").string();
  const std::vector<std::tuple<std::string, nlohmann::json, std::string>> cases = {
      {"d_model", "512", "field 'd_model' must be an integer"},
      {"num_layers", 2.5, "field 'num_layers' must be an integer"},
      {"d_kv", 0, "field 'd_kv' is 0, must be at least 1"},
      {"relative_attention_num_buckets", true, "field 'relative_attention_num_buckets' must be an integer"},
      {"eos_token_id", -1, "field 'eos_token_id' is -1, must be at least 0"},
      {"layer_norm_epsilon", "1e-6", "field 'layer_norm_epsilon' must be a number"},
      {"layer_norm_epsilon", 0, "field 'layer_norm_epsilon' is 0, must be positive"},
      {"feed_forward_proj", 5, "field 'feed_forward_proj' must be a string"},
  };
  for (const auto& [key, value, message] : cases) {
    nlohmann::json config = good;
    config[key] = value;
    std::ofstream(path) << config.dump();
    absl::StatusOr<T5EncoderConfig> c = LoadT5EncoderConfig(dir.string());
    ASSERT_FALSE(c.ok()) << key << " = " << value.dump();
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << c.status();
    EXPECT_NE(c.status().message().find(path + ": " + message), std::string::npos) << c.status();
  }
  std::ofstream(path) << "[1, 2]";
  absl::StatusOr<T5EncoderConfig> c = LoadT5EncoderConfig(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("not a JSON object"), std::string::npos) << c.status();
  std::ofstream(path) << good.dump();
  c = LoadT5EncoderConfig(dir.string());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->d_model, good["d_model"].get<int32_t>());
  fs::remove_all(dir);
  c = LoadT5EncoderConfig(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("T5 text encoder's config"), std::string::npos) << c.status();
}

TEST(CaptionEmbedderTest, PrefixEmbeddingsOfBothRowsMatchCapProj) {
  const nlohmann::json golden = ReadJson(std::string(kRel) + "/goldens.json");
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> gpt = checkpoint::OpenCheckpointFile(Dir() + "/t2i_tiny.pt");
  ASSERT_TRUE(gpt.ok()) << gpt.status();
  const int32_t t5_dim = golden["t5_d_model"].get<int32_t>(), dim = golden["dim"].get<int32_t>();
  absl::StatusOr<CaptionEmbedder> embedder = CaptionEmbedder::Load(**gpt, t5_dim, dim, 120);
  ASSERT_TRUE(embedder.ok()) << embedder.status();
  const std::vector<float> features = ReadF32(Dir() + "/t5_features.f32");
  absl::StatusOr<PrefixEmbeddings> prefix = embedder->Embed(features);
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  EXPECT_EQ(prefix->tokens, golden["tokens"].get<int32_t>());
  EXPECT_LT(RelativeError(prefix->cond.data(), ReadF32(Dir() + "/prefix_cond.f32")), kTolerance);
  EXPECT_LT(RelativeError(prefix->uncond.data(), ReadF32(Dir() + "/prefix_uncond.f32")), kTolerance);
  // More tokens than slots, or a ragged row, is refused.
  EXPECT_FALSE(embedder->Embed(std::vector<float>(121 * t5_dim, 0.0f)).ok());
  EXPECT_FALSE(embedder->Embed(std::vector<float>(t5_dim + 1, 0.0f)).ok());
  // A c2i checkpoint has no caption MLP: the missing tensor is named.
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> c2i =
      checkpoint::OpenCheckpointFile(SourceDir() + "/tests/goldens/tiny/tiny-llamagen-c2i/c2i_tiny.pt");
  ASSERT_TRUE(c2i.ok());
  absl::StatusOr<CaptionEmbedder> missing = CaptionEmbedder::Load(**c2i, t5_dim, dim, 120);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("cap_proj"), std::string::npos) << missing.status();
}

// The whole recipe from the raw prompt: cleaning, tokens, T5, caption MLP.
TEST(T2iPromptTest, RawPromptToPrefixEmbeddings) {
  const nlohmann::json golden = ReadJson(std::string(kRel) + "/goldens.json");
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> gpt = checkpoint::OpenCheckpointFile(Dir() + "/t2i_tiny.pt");
  ASSERT_TRUE(gpt.ok()) << gpt.status();
  const int32_t t5_dim = golden["t5_d_model"].get<int32_t>(), dim = golden["dim"].get<int32_t>();
  absl::StatusOr<std::shared_ptr<const T2iPrompt>> prompt = T2iPrompt::Load(T5Dir(), **gpt, t5_dim, dim, 120);
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  absl::StatusOr<PrefixEmbeddings> prefix = (*prompt)->Embed(golden["prompt"].get<std::string>());
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  EXPECT_EQ(prefix->tokens, golden["tokens"].get<int32_t>());
  EXPECT_LT(RelativeError(prefix->cond.data(), ReadF32(Dir() + "/prefix_cond.f32")), kTolerance);
  EXPECT_LT(RelativeError(prefix->uncond.data(), ReadF32(Dir() + "/prefix_uncond.f32")), kTolerance);
  // A GPT whose caption_dim is not T5's d_model is named.
  absl::StatusOr<std::shared_ptr<const T2iPrompt>> wrong = T2iPrompt::Load(T5Dir(), **gpt, 2048, dim, 120);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("caption_dim 2048"), std::string::npos) << wrong.status();
}

}  // namespace
}  // namespace argen::llamagen
