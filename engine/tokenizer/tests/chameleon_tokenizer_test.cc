// The Chameleon / Lumina-mGPT tokenizer format against HF tokenizers
// (tools/goldens/make_chameleon_tokenizer_goldens.py: Chameleon's
// pre-tokenizer, special tokens and BOS config, vocabulary reduced). The
// Lumina-mGPT prompt and image-token map on the same goldens:
// engine/families/lumina/tests/lumina_prompt_test.cc.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/tokenizer/tests/golden_paths.h"
#include "engine/tokenizer/tokenizer.h"

namespace argen::tokenizer {
namespace {

using testing::ChameleonDir;
using testing::LoadChameleon;
using testing::LoadChameleonGoldens;

TEST(ChameleonTokenizerTest, EncodeAndDecodeMatchHuggingFace) {
  const nlohmann::json goldens = LoadChameleonGoldens();
  ASSERT_FALSE(goldens.is_discarded()) << "cannot read " << ChameleonDir() << "/goldens.json";
  const Tokenizer tok = LoadChameleon();
  ASSERT_GE(goldens["cases"].size(), 50u);
  for (const nlohmann::json& c : goldens["cases"]) {
    const std::string text = c["text"];
    SCOPED_TRACE("text: \"" + text + "\"");
    // tokenizer_config.json (LlamaTokenizerFast, add_bos_token) puts <s> in front.
    auto ids = tok.Encode(text, /*add_special_tokens=*/true);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, c["ids"].get<std::vector<int32_t>>());
    auto plain = tok.Encode(text, /*add_special_tokens=*/false);
    ASSERT_TRUE(plain.ok()) << plain.status();
    EXPECT_EQ(*plain, c["ids_no_special"].get<std::vector<int32_t>>());
    auto decoded = tok.Decode(c["ids"].get<std::vector<int32_t>>(), /*skip_special_tokens=*/false);
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(*decoded, c["decoded"].get<std::string>());
    auto skipped = tok.Decode(c["ids"].get<std::vector<int32_t>>(), /*skip_special_tokens=*/true);
    ASSERT_TRUE(skipped.ok()) << skipped.status();
    EXPECT_EQ(*skipped, c["decoded_skip_special"].get<std::string>());
  }
}

TEST(ChameleonTokenizerTest, SpecialTokensHaveTheirIds) {
  const nlohmann::json goldens = LoadChameleonGoldens();
  const Tokenizer tok = LoadChameleon();
  const auto names = goldens["special_tokens"].get<std::vector<std::string>>();
  ASSERT_GT(names.size(), 70u);
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(tok.TokenToId(names[i]), static_cast<int32_t>(i)) << names[i];
    EXPECT_EQ(tok.IdToToken(static_cast<int32_t>(i)), names[i]);
  }
}

}  // namespace
}  // namespace argen::tokenizer
