// Token ids and decoded text against HF tokenizers on 60+ strings, for a
// DeepSeek-style byte-level BPE (both merges formats), the same model behind
// GPT-2's regex split, and a WordLevel tokenizer.
#include <gtest/gtest.h>

#include "engine/tokenizer/tests/golden_paths.h"
#include "engine/tokenizer/tokenizer.h"

namespace argen::tokenizer {
namespace {

using testing::GoldenDir;
using testing::LoadGoldens;

class GoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenTest, EncodeAndDecodeMatchHuggingFace) {
  const nlohmann::json goldens = LoadGoldens();
  ASSERT_FALSE(goldens.is_discarded()) << "cannot read " << GoldenDir() << "/goldens.json";
  const nlohmann::json& entry = goldens["tokenizers"][GetParam()];
  ASSERT_TRUE(entry.is_object());
  auto tok = Tokenizer::LoadFromFile(GoldenDir() + "/" + entry["file"].get<std::string>());
  ASSERT_TRUE(tok.ok()) << tok.status();
  ASSERT_GE(entry["cases"].size(), 50u);
  for (const nlohmann::json& c : entry["cases"]) {
    const std::string text = c["text"];
    SCOPED_TRACE("text: \"" + text + "\"");
    auto ids = tok->Encode(text, /*add_special_tokens=*/true);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, c["ids"].get<std::vector<int32_t>>());
    auto plain = tok->Encode(text, /*add_special_tokens=*/false);
    ASSERT_TRUE(plain.ok()) << plain.status();
    EXPECT_EQ(*plain, c["ids_no_special"].get<std::vector<int32_t>>());
    auto decoded = tok->Decode(c["ids"].get<std::vector<int32_t>>(), /*skip_special_tokens=*/false);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, c["decoded"].get<std::string>());
    auto skipped = tok->Decode(c["ids"].get<std::vector<int32_t>>(), /*skip_special_tokens=*/true);
    ASSERT_TRUE(skipped.ok()) << skipped.status();
    EXPECT_EQ(*skipped, c["decoded_skip_special"].get<std::string>());
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, GoldenTest,
                         ::testing::Values("bpe_deepseek", "bpe_deepseek_string_merges", "bpe_gpt2_pretok",
                                           "wordlevel"));

TEST(TokenizerTest, SpecialTokensAreFoundByContent) {
  auto tok = Tokenizer::LoadFromFile(GoldenDir() + "/bpe_deepseek/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto pad = tok->TokenToId("<｜▁pad▁｜>");
  ASSERT_TRUE(pad.has_value());
  EXPECT_EQ(tok->IdToToken(*pad), "<｜▁pad▁｜>");
  EXPECT_FALSE(tok->TokenToId("<not a token>").has_value());
  EXPECT_GT(tok->IdLimit(), *pad);
}

TEST(TokenizerTest, DecodeRejectsUnknownIds) {
  auto tok = Tokenizer::LoadFromFile(GoldenDir() + "/bpe_deepseek/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  const std::vector<int32_t> ids = {tok->IdLimit() + 5};
  EXPECT_FALSE(tok->Decode(ids).ok());
  const std::vector<int32_t> negative = {-1};
  EXPECT_FALSE(tok->Decode(negative).ok());
}

TEST(TokenizerTest, EncodeRejectsInvalidUtf8) {
  auto tok = Tokenizer::LoadFromFile(GoldenDir() + "/bpe_deepseek/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto ids = tok->Encode(std::string("ok \xff\xfe bad"));
  ASSERT_FALSE(ids.ok());
  EXPECT_NE(ids.status().message().find("UTF-8"), std::string::npos) << ids.status();
}

}  // namespace
}  // namespace argen::tokenizer
