// argen's two Emu3 tokenizer loaders on the real vocabulary, where the files
// are at hand (ARGEN_EMU3_REAL_TOKENIZER = the directory that
// tools/goldens/check_emu3_real_tokenizer.py writes: emu3.tiktoken,
// emu3_vision_tokens.txt, the converted tokenizer.json and the references'
// ids.json); skipped otherwise (CI has no 151,643-rank vocabulary). BAAI's
// layout must give tiktoken's ids, transformers' layout HF tokenizers' ids.
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "engine/families/emu3/emu3_prompt.h"
#include "engine/families/emu3/emu3_tokenizer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace argen::emu3 {
namespace {

TEST(Emu3RealTokenizerTest, BothLoadersGiveTheirReferencesIds) {
  const char* dir = std::getenv("ARGEN_EMU3_REAL_TOKENIZER");
  if (dir == nullptr) GTEST_SKIP() << "set ARGEN_EMU3_REAL_TOKENIZER (tools/goldens/check_emu3_real_tokenizer.py)";
  std::ifstream in(std::string(dir) + "/ids.json");
  ASSERT_TRUE(in.good()) << dir;
  const nlohmann::json ids = nlohmann::json::parse(in);
  for (const auto& [layout, key] : {std::pair{Emu3Layout::kBaai, "baai"}, std::pair{Emu3Layout::kTransformers, "hf"}}) {
    absl::StatusOr<std::shared_ptr<const tokenizer::Tokenizer>> tok = LoadEmu3Tokenizer(dir, layout);
    ASSERT_TRUE(tok.ok()) << tok.status();
    absl::StatusOr<Emu3TokenIds> special = FindEmu3Tokens(**tok, 32768);
    ASSERT_TRUE(special.ok()) << special.status();
    EXPECT_EQ(special->first_visual, 151854);
    EXPECT_EQ(special->row_end, 151846);
    EXPECT_EQ(special->bos, 151849);
    EXPECT_EQ(special->image, 151851);
    int mismatches = 0;
    for (size_t i = 0; i < ids["texts"].size(); ++i) {
      const std::string text = ids["texts"][i].get<std::string>();
      absl::StatusOr<std::vector<int32_t>> got = (*tok)->Encode(text, false);
      ASSERT_TRUE(got.ok()) << text;
      if (*got != ids[key][i].get<std::vector<int32_t>>() && ++mismatches <= 5) ADD_FAILURE() << key << ": " << text;
    }
    EXPECT_EQ(mismatches, 0) << key;
  }
}

}  // namespace
}  // namespace argen::emu3
