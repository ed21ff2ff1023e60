// The pre-tokenizers of public tokenizers (GPT-2, Llama-3 / cl100k, Qwen2,
// GPT-4o / o200k), parsed from their tokenizer.json form, cut hard strings
// exactly as HF tokenizers does (tests/goldens/tokenizer/pretokenizers.json,
// made by tools/goldens/make_tokenizer_goldens.py --pretokenizers).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "engine/tokenizer/pre_tokenizer.h"
#include "engine/tokenizer/tests/golden_paths.h"
#include "engine/tokenizer/utf8.h"

namespace argen::tokenizer {
namespace {

nlohmann::json LoadPreTokenizerGoldens() {
  std::ifstream in(testing::GoldenDir() + "/pretokenizers.json");
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
}

TEST(PreTokenizerGoldenTest, PublicTokenizersSplitAsHuggingFace) {
  const nlohmann::json goldens = LoadPreTokenizerGoldens();
  ASSERT_TRUE(goldens.is_array()) << "cannot read pretokenizers.json";
  ASSERT_GE(goldens.size(), 4u);
  for (const nlohmann::json& g : goldens) {
    const std::string name = g["name"];
    absl::StatusOr<std::unique_ptr<PreTokenizer>> pre = ParsePreTokenizer(g["pre_tokenizer"], name);
    ASSERT_TRUE(pre.ok()) << name << ": " << pre.status();
    ASSERT_NE(*pre, nullptr);
    for (const nlohmann::json& c : g["cases"]) {
      const std::string text = c["text"];
      std::vector<std::u32string> pieces = {*DecodeUtf8(text)};
      (*pre)->Apply(pieces);
      std::vector<std::string> got;
      for (const std::u32string& p : pieces) got.push_back(EncodeUtf8(p));
      EXPECT_EQ(got, c["pieces"].get<std::vector<std::string>>()) << name << " on \"" << text << "\"";
    }
  }
}

}  // namespace
}  // namespace argen::tokenizer
