// Janus-Pro generation prompt ids (cond and CFG uncond) against a Python
// re-statement of the official prompt building, tokenized by transformers'
// LlamaTokenizerFast (the class the official script uses).
#include "engine/families/janus/janus_chat_prompt.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "engine/checkpoint/tests/test_files.h"
#include "engine/families/janus/janus_family.h"
#include "engine/tokenizer/tests/golden_paths.h"

namespace argen::janus {
namespace {

using tokenizer::Tokenizer;
using tokenizer::testing::GoldenDir;
using tokenizer::testing::LoadGoldens;

TEST(GenerationPromptTest, MatchesOfficialPromptIds) {
  const nlohmann::json goldens = LoadGoldens();
  ASSERT_FALSE(goldens.is_discarded());
  // Our trained DeepSeek-style tokenizer and the tiny checkpoints' tokenizer.
  ASSERT_GE(goldens["prompts"].size(), 2u);
  for (const nlohmann::json& set : goldens["prompts"]) {
    const std::string file = set["file"];
    SCOPED_TRACE("tokenizer: " + file);
    auto tok = Tokenizer::LoadFromFile(GoldenDir() + "/" + file);
    ASSERT_TRUE(tok.ok()) << tok.status();
    ASSERT_GE(set["cases"].size(), 3u);
    for (const nlohmann::json& c : set["cases"]) {
      const std::string caption = c["caption"];
      SCOPED_TRACE("caption: \"" + caption + "\"");
      EXPECT_EQ(GenerationPromptText(caption), c["text"].get<std::string>());
      auto ids = BuildGenerationPrompt(*tok, caption, /*max_prompt_tokens=*/0);
      ASSERT_TRUE(ids.ok()) << ids.status();
      EXPECT_EQ(ids->cond, c["cond"].get<std::vector<int32_t>>());
      EXPECT_EQ(ids->uncond, c["uncond"].get<std::vector<int32_t>>());
      ASSERT_EQ(ids->cond.size(), ids->uncond.size());
      EXPECT_EQ(ids->cond.back(), *tok->TokenToId(kImageStartToken));
      EXPECT_EQ(ids->cond.front(), *tok->TokenToId(kBosToken));
    }
  }
}

// Issue 34: a negative prompt is the guidance row's prompt. The family's
// encoder gives the negative prompt's own generation prompt there (the
// official ids of that caption), keeps the caption's row, and without one
// keeps the official padded row exactly.
TEST(GenerationPromptTest, NegativePromptIsTheGuidanceRowsPrompt) {
  const nlohmann::json goldens = LoadGoldens();
  ASSERT_FALSE(goldens.is_discarded());
  for (const nlohmann::json& set : goldens["prompts"]) {
    const std::string file = set["file"];
    SCOPED_TRACE("tokenizer: " + file);
    const std::string model_dir = std::filesystem::path(GoldenDir() + "/" + file).parent_path().string();
    absl::StatusOr<model::PromptEncoder> encoder = TokenizerPromptEncoder(model_dir);
    ASSERT_TRUE(encoder.ok()) << encoder.status();
    const nlohmann::json& caption = set["cases"][0];
    const nlohmann::json& negative = set["cases"][1];
    auto plain = (*encoder)({caption["caption"].get<std::string>(), ""});
    ASSERT_TRUE(plain.ok()) << plain.status();
    EXPECT_EQ(plain->first, caption["cond"].get<std::vector<int32_t>>());
    EXPECT_EQ(plain->second, caption["uncond"].get<std::vector<int32_t>>());
    auto guided = (*encoder)({caption["caption"].get<std::string>(), negative["caption"].get<std::string>()});
    ASSERT_TRUE(guided.ok()) << guided.status();
    EXPECT_EQ(guided->first, caption["cond"].get<std::vector<int32_t>>());
    EXPECT_EQ(guided->second, negative["cond"].get<std::vector<int32_t>>());
    auto blank = (*encoder)({caption["caption"].get<std::string>(), " \n "});
    ASSERT_FALSE(blank.ok());
    EXPECT_EQ(blank.status().message().rfind("negative_prompt: ", 0), 0u) << blank.status();
  }
}

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
}

// The training side's ids (tools/train/make_system_prompt_golden.py: HF
// tokenizers, the template with Janus' system prompt) on the shipped model's
// tokenizer.
nlohmann::json SystemPromptGolden() {
  return ReadJson(checkpoint::testing::SourceDir() + "/engine/families/janus/tests/system_prompt_golden.json");
}

TEST(GenerationPromptTest, SystemPromptMatchesTrainingIds) {
  const nlohmann::json golden = SystemPromptGolden();
  ASSERT_FALSE(golden.is_discarded());
  const std::string system = golden["system_prompt"];
  auto tok = Tokenizer::LoadFromFile(checkpoint::testing::SourceDir() + "/" + golden["tokenizer"].get<std::string>());
  ASSERT_TRUE(tok.ok()) << tok.status();
  ASSERT_EQ(golden["cases"].size(), 3u);
  for (const nlohmann::json& c : golden["cases"]) {
    const std::string caption = c["caption"];
    SCOPED_TRACE("caption: \"" + caption + "\"");
    EXPECT_EQ(GenerationPromptText(caption, system),
              system + "\n\n<|User|>: " + caption + "\n\n<|Assistant|>:<begin_of_image>");
    EXPECT_EQ(GenerationPromptText(caption, system), c["text"].get<std::string>());
    auto ids = BuildGenerationPrompt(*tok, caption, /*max_prompt_tokens=*/0, system);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(ids->cond, c["cond"].get<std::vector<int32_t>>());
    EXPECT_EQ(ids->uncond, c["uncond"].get<std::vector<int32_t>>());
    // Without it, the same caption gives the official (shorter) prompt.
    auto official = BuildGenerationPrompt(*tok, caption, 0);
    ASSERT_TRUE(official.ok()) << official.status();
    EXPECT_LT(official->cond.size(), ids->cond.size());
  }
}

// A model folder selects the template through config.json: with
// argen_system_prompt the family's encoder prompts (and builds a negative
// prompt's guidance row) with it; the shipped model, without the key, keeps
// the official prompt.
TEST(GenerationPromptTest, ModelConfigSelectsTheSystemPrompt) {
  const nlohmann::json golden = SystemPromptGolden();
  ASSERT_FALSE(golden.is_discarded());
  const std::string shipped = checkpoint::testing::SourceDir() + "/models/argen-scenes-v1";
  checkpoint::testing::ScratchDir dir;
  nlohmann::json config = ReadJson(shipped + "/config.json");
  ASSERT_FALSE(config.is_discarded());
  ASSERT_FALSE(config.contains("argen_system_prompt"));
  config["argen_system_prompt"] = golden["system_prompt"];
  std::ofstream(dir.File("config.json")) << config.dump();
  std::filesystem::copy_file(shipped + "/tokenizer.json", dir.File("tokenizer.json"));

  absl::StatusOr<families::FamilyModel> with = LoadJanus(dir.path());
  ASSERT_TRUE(with.ok()) << with.status();
  absl::StatusOr<model::PromptEncoder> encoder = with->make_prompt();
  ASSERT_TRUE(encoder.ok()) << encoder.status();
  const nlohmann::json& first = golden["cases"][0];
  const nlohmann::json& second = golden["cases"][1];
  auto plain = (*encoder)({first["caption"].get<std::string>(), ""});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->first, first["cond"].get<std::vector<int32_t>>());
  EXPECT_EQ(plain->second, first["uncond"].get<std::vector<int32_t>>());
  auto guided = (*encoder)({first["caption"].get<std::string>(), second["caption"].get<std::string>()});
  ASSERT_TRUE(guided.ok()) << guided.status();
  EXPECT_EQ(guided->second, second["cond"].get<std::vector<int32_t>>());

  absl::StatusOr<families::FamilyModel> without = LoadJanus(shipped);
  ASSERT_TRUE(without.ok()) << without.status();
  absl::StatusOr<model::PromptEncoder> official = without->make_prompt();
  ASSERT_TRUE(official.ok()) << official.status();
  auto tok = Tokenizer::LoadFromFile(shipped + "/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto want = BuildGenerationPrompt(*tok, first["caption"].get<std::string>(), 0);
  ASSERT_TRUE(want.ok()) << want.status();
  auto got = (*official)({first["caption"].get<std::string>(), ""});
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->first, want->cond);
  EXPECT_EQ(got->second, want->uncond);
}

TEST(GenerationPromptTest, RejectsEmptyAndOverlongCaptions) {
  auto tok = Tokenizer::LoadFromFile(GoldenDir() + "/bpe_deepseek/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ(BuildGenerationPrompt(*tok, "", 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BuildGenerationPrompt(*tok, " \n\t ", 0).status().code(), absl::StatusCode::kInvalidArgument);
  auto fits = BuildGenerationPrompt(*tok, "a red cube", 0);
  ASSERT_TRUE(fits.ok()) << fits.status();
  const int32_t n = static_cast<int32_t>(fits->cond.size());
  EXPECT_TRUE(BuildGenerationPrompt(*tok, "a red cube", n).ok());
  auto over = BuildGenerationPrompt(*tok, "a red cube", n - 1);
  ASSERT_FALSE(over.ok());
  EXPECT_NE(over.status().message().find("limit"), std::string::npos) << over.status();
  EXPECT_FALSE(BuildGenerationPrompt(*tok, std::string("bad \xc3"), 0).ok());
}

TEST(GenerationPromptTest, MissingSpecialTokenIsNamed) {
  auto tok = Tokenizer::LoadFromFile(GoldenDir() + "/wordlevel/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto ids = BuildGenerationPrompt(*tok, "a red cube", 0);
  ASSERT_FALSE(ids.ok());
  EXPECT_NE(ids.status().message().find("begin"), std::string::npos) << ids.status();
  EXPECT_NE(ids.status().message().find("wordlevel/tokenizer.json"), std::string::npos) << ids.status();
}

}  // namespace
}  // namespace argen::janus
