// The Lumina-mGPT generation prompt (lumina_prompt.h) and Chameleon's
// image-token vocabulary map (chameleon_vocab.h) against HF tokenizers'
// Chameleon goldens (tools/goldens/make_chameleon_tokenizer_goldens.py).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/families/lumina/chameleon_vocab.h"
#include "engine/families/lumina/lumina_family.h"
#include "engine/families/lumina/lumina_prompt.h"
#include "engine/tokenizer/tests/golden_paths.h"
#include "engine/tokenizer/tokenizer.h"

namespace argen::lumina {
namespace {

using tokenizer::Tokenizer;
using tokenizer::testing::ChameleonDir;
using tokenizer::testing::GoldenDir;
using tokenizer::testing::LoadChameleon;
using tokenizer::testing::LoadChameleonGoldens;

TEST(LuminaPromptTest, MatchesLuminaItemProcessorIds) {
  const nlohmann::json goldens = LoadChameleonGoldens();
  const Tokenizer tok = LoadChameleon();
  auto special = FindLuminaTokens(tok);
  ASSERT_TRUE(special.ok()) << special.status();
  ASSERT_GE(goldens["prompts"].size(), 3u);
  for (const nlohmann::json& p : goldens["prompts"]) {
    const std::string caption = p["caption"];
    const int32_t width = p["width"], height = p["height"];
    SCOPED_TRACE("caption: \"" + caption + "\"");
    EXPECT_EQ(LuminaPromptText(caption, width, height), p["text"].get<std::string>());
    auto ids = BuildLuminaPrompt(tok, caption, width, height, /*max_prompt_tokens=*/0);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(ids->cond, p["ids"].get<std::vector<int32_t>>());
    EXPECT_EQ(ids->cond.front(), special->bos);
    EXPECT_EQ(ids->cond.back(), special->end_of_turn);
    const std::vector<int32_t> header = {special->begin_image,
                                         *tok.TokenToId(LuminaResolutionToken(height / kLuminaPatchPixels)),
                                         *tok.TokenToId(LuminaResolutionToken(width / kLuminaPatchPixels))};
    EXPECT_EQ(ids->header, header);
  }
}

// Issue 34: without a negative prompt the guidance row is the image header
// alone (the official CFG processor's unconditional context); with one, it is
// the negative prompt's own conversation and header (the official ids of that
// caption at the same size).
TEST(LuminaPromptTest, NegativePromptIsTheGuidanceRowsPrompt) {
  const nlohmann::json goldens = LoadChameleonGoldens();
  const nlohmann::json& caption = goldens["prompts"][0];
  const nlohmann::json& negative = goldens["prompts"][1];
  const int32_t width = caption["width"], height = caption["height"];
  ASSERT_EQ(negative["width"], width);
  ASSERT_EQ(negative["height"], height);
  auto tok = std::make_shared<const Tokenizer>(LoadChameleon());
  absl::StatusOr<model::PromptEncoder> encoder = LuminaPromptEncoder(tok, width, height);
  ASSERT_TRUE(encoder.ok()) << encoder.status();
  auto ids = BuildLuminaPrompt(*tok, caption["caption"].get<std::string>(), width, height, 0);
  ASSERT_TRUE(ids.ok()) << ids.status();
  std::vector<int32_t> cond = caption["ids"].get<std::vector<int32_t>>();
  cond.insert(cond.end(), ids->header.begin(), ids->header.end());
  std::vector<int32_t> negative_row = negative["ids"].get<std::vector<int32_t>>();
  negative_row.insert(negative_row.end(), ids->header.begin(), ids->header.end());

  auto plain = (*encoder)({caption["caption"].get<std::string>(), ""});
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->first, cond);
  EXPECT_EQ(plain->second, ids->header);
  auto guided = (*encoder)({caption["caption"].get<std::string>(), negative["caption"].get<std::string>()});
  ASSERT_TRUE(guided.ok()) << guided.status();
  EXPECT_EQ(guided->first, cond);
  EXPECT_EQ(guided->second, negative_row);
}

TEST(LuminaPromptTest, ResolutionTokenNames) {
  EXPECT_EQ(LuminaResolutionToken(16), "<reserved08816>");
  EXPECT_EQ(LuminaResolutionToken(24), "<reserved08824>");
  EXPECT_EQ(LuminaResolutionToken(128), "<reserved08928>");
}

TEST(LuminaPromptTest, RejectsBadRequests) {
  const Tokenizer tok = LoadChameleon();
  EXPECT_EQ(BuildLuminaPrompt(tok, "", 384, 384, 0).status().code(), absl::StatusCode::kInvalidArgument);
  auto odd = BuildLuminaPrompt(tok, "a red cube", 384, 100, 0);
  ASSERT_EQ(odd.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(odd.status().message().find("height 100"), std::string::npos) << odd.status();
  EXPECT_EQ(BuildLuminaPrompt(tok, "a red cube", 0, 384, 0).status().code(), absl::StatusCode::kInvalidArgument);
  // The golden tokenizer has resolution tokens for 1..32 units (up to 1024 px).
  auto missing = BuildLuminaPrompt(tok, "a red cube", 384, 1056, 0);
  ASSERT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(missing.status().message().find("<reserved08833>"), std::string::npos) << missing.status();
  auto fits = BuildLuminaPrompt(tok, "a red cube", 384, 384, 0);
  ASSERT_TRUE(fits.ok()) << fits.status();
  const int32_t n = static_cast<int32_t>(fits->cond.size());
  EXPECT_TRUE(BuildLuminaPrompt(tok, "a red cube", 384, 384, n).ok());
  EXPECT_EQ(BuildLuminaPrompt(tok, "a red cube", 384, 384, n - 1).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(BuildLuminaPrompt(tok, std::string("bad \xc3"), 384, 384, 0).ok());
}

TEST(LuminaPromptTest, MissingSpecialTokenIsNamed) {
  auto tok = Tokenizer::LoadFromFile(GoldenDir() + "/bpe_deepseek/tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status();
  auto ids = BuildLuminaPrompt(*tok, "a red cube", 384, 384, 0);
  ASSERT_EQ(ids.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(ids.status().message().find("<s>"), std::string::npos) << ids.status();
}

TEST(ChameleonVocabTest, ImageTokenNamesRoundTrip) {
  EXPECT_EQ(ChameleonImageTokenName(0), "IMGIMGAZ");
  EXPECT_EQ(ChameleonImageTokenName(9), "IMGIMGJZ");
  EXPECT_EQ(ChameleonImageTokenName(10), "IMGIMGBAZ");
  EXPECT_EQ(ChameleonImageTokenName(8191), "IMGIMGIBJBZ");
  for (int32_t code = 0; code < 9000; ++code) {
    EXPECT_EQ(ChameleonImageTokenCode(ChameleonImageTokenName(code)), code);
  }
  for (const char* bad : {"IMGIMG", "IMGIMGZ", "IMGIMGAAZ", "IMGIMGABZ", "IMGIMGKZ", "IMGIMGAB", "IMGIMGaZ",
                          "XIMGIMGAZ", "IMGIMGBAZZ", "IMGIMGBBBBBBBBBBBBZ"}) {
    EXPECT_FALSE(ChameleonImageTokenCode(bad).has_value()) << bad;
  }
}

std::vector<std::pair<std::string, int32_t>> GoldenVocab() {
  const nlohmann::json goldens = LoadChameleonGoldens();
  std::vector<std::pair<std::string, int32_t>> vocab;
  const auto names = goldens["special_tokens"].get<std::vector<std::string>>();
  for (size_t i = 0; i < names.size(); ++i) vocab.emplace_back(names[i], static_cast<int32_t>(i));
  vocab.emplace_back("hello", 900);  // text tokens are ignored
  return vocab;
}

TEST(ChameleonVocabTest, PublishedLayoutIsContiguousAndIdentity) {
  auto range = BuildImageTokenRange(GoldenVocab(), 64, "vocabulary_map");
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ(range->first_id, 4);
  EXPECT_EQ(range->count, 64);
  EXPECT_TRUE(range->identity);
  for (int32_t i = 0; i < 64; ++i) EXPECT_EQ(range->code_of_offset[i], i);
}

TEST(ChameleonVocabTest, PermutedCodesMapThroughTheTable) {
  std::vector<std::pair<std::string, int32_t>> vocab;
  std::vector<int32_t> codes(16);
  for (int32_t i = 0; i < 16; ++i) codes[i] = i;
  std::shuffle(codes.begin(), codes.end(), std::mt19937(3));
  for (int32_t i = 0; i < 16; ++i) vocab.emplace_back(ChameleonImageTokenName(codes[i]), 100 + i);
  auto range = BuildImageTokenRange(vocab, 16, "vocab");
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ(range->first_id, 100);
  EXPECT_FALSE(range->identity);
  EXPECT_EQ(range->code_of_offset, codes);
}

TEST(ChameleonVocabTest, BadMapsAreRefusedWithReasons) {
  const auto expect_error = [](std::vector<std::pair<std::string, int32_t>> vocab, int32_t n, const char* needle) {
    auto range = BuildImageTokenRange(vocab, n, "config.json vocabulary_map");
    ASSERT_FALSE(range.ok()) << needle;
    EXPECT_EQ(range.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(range.status().message().find(needle), std::string::npos) << range.status();
    EXPECT_NE(range.status().message().find("config.json vocabulary_map"), std::string::npos);
  };
  auto vocab = GoldenVocab();
  expect_error(vocab, 65, "expected one per VQGAN code: 65");
  expect_error(vocab, 32, "outside the codebook");
  auto gap = vocab;
  gap[10].second = 500;  // IMGIMGGZ moved away from the range
  expect_error(gap, 64, "not one contiguous range");
  auto dup = vocab;
  dup[10].first = "IMGIMGFZ";  // code 5 twice (ids 9 and 10)
  expect_error(dup, 64, "code 5 has two image tokens");
  auto malformed = vocab;
  malformed.emplace_back("IMGIMGQQ", 1000);
  expect_error(malformed, 64, "not an image token name");
  expect_error(vocab, 0, "codebook size");
}

}  // namespace
}  // namespace argen::lumina
