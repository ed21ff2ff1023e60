// The NextStep prompt recipe against the official pipeline's ids
// (NextStepPipeline._build_captions + tokenizer + _add_prefix_ids on the tiny
// checkpoint's tokenizer, tools/goldens/make_nextstep_goldens.py).
#include "engine/families/nextstep/nextstep_prompt.h"

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/golden_files.h"

namespace argen::nextstep {
namespace {

using test_support::ReadJson;
using test_support::SourceDir;

const char kRel[] = "tests/goldens/tiny/tiny-nextstep";
std::string Dir() { return SourceDir() + "/" + kRel; }

class NextStepPromptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<NextStepConfig> c = LoadNextStepConfig(Dir());
    ASSERT_TRUE(c.ok()) << c.status();
    config_ = *c;
    absl::StatusOr<std::shared_ptr<const tokenizer::Tokenizer>> tok = LoadNextStepTokenizer(Dir());
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = *tok;
    absl::StatusOr<NextStepTokenIds> ids = FindNextStepTokens(*tokenizer_, config_);
    ASSERT_TRUE(ids.ok()) << ids.status();
    ids_ = *ids;
  }
  NextStepConfig config_;
  std::shared_ptr<const tokenizer::Tokenizer> tokenizer_;
  NextStepTokenIds ids_;
};

TEST_F(NextStepPromptTest, FindsTheImageTokensAtConfigIds) {
  EXPECT_EQ(ids_.boi, config_.boi);
  EXPECT_EQ(ids_.eoi, config_.eoi);
  EXPECT_EQ(ids_.image_placeholder, config_.image_placeholder_id);
  EXPECT_EQ(tokenizer_->IdToToken(ids_.image_area), std::string(kImageAreaToken));
}

TEST_F(NextStepPromptTest, RowsAreTheOfficialPipelines) {
  const nlohmann::json golden = ReadJson(std::string(kRel) + "/goldens.json");
  ASSERT_GE(golden["prompts"].size(), 2u);
  for (const nlohmann::json& p : golden["prompts"]) {
    absl::StatusOr<NextStepPromptIds> ids =
        BuildNextStepPrompt(*tokenizer_, ids_, p["caption"].get<std::string>(), p["negative_prompt"].get<std::string>(),
                            p["grid_w"], p["grid_h"]);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(ids->cond, p["cond"].get<std::vector<int32_t>>()) << p["caption"];
    EXPECT_EQ(ids->uncond, p["uncond"].get<std::vector<int32_t>>()) << p["caption"];
    EXPECT_EQ(ids->cond.back(), config_.boi);
  }
}

TEST_F(NextStepPromptTest, EmptyNegativePromptIsTheExamplesDefault) {
  absl::StatusOr<NextStepPromptIds> empty = BuildNextStepPrompt(*tokenizer_, ids_, "a cat", "", 3, 3);
  absl::StatusOr<NextStepPromptIds> stated =
      BuildNextStepPrompt(*tokenizer_, ids_, "a cat", kDefaultNegativePrompt, 3, 3);
  ASSERT_TRUE(empty.ok() && stated.ok());
  EXPECT_EQ(empty->uncond, stated->uncond);
}

TEST_F(NextStepPromptTest, BadInputIsRefusedNamingTheField) {
  EXPECT_EQ(BuildNextStepPrompt(*tokenizer_, ids_, "", "", 3, 3).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(BuildNextStepPrompt(*tokenizer_, ids_, "a cat", "", 0, 3).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<NextStepPromptIds> bad_utf8 = BuildNextStepPrompt(*tokenizer_, ids_, "a \xff cat", "", 3, 3);
  ASSERT_FALSE(bad_utf8.ok());
  EXPECT_NE(bad_utf8.status().message().find("prompt"), std::string::npos) << bad_utf8.status();
  absl::StatusOr<NextStepPromptIds> bad_negative = BuildNextStepPrompt(*tokenizer_, ids_, "a cat", "\xc3", 3, 3);
  ASSERT_FALSE(bad_negative.ok());
  EXPECT_NE(bad_negative.status().message().find("negative_prompt"), std::string::npos) << bad_negative.status();
}

TEST_F(NextStepPromptTest, ConfigIdThatIsNotTheTokenIsRefused) {
  NextStepConfig wrong = config_;
  wrong.boi = config_.eoi;
  absl::StatusOr<NextStepTokenIds> ids = FindNextStepTokens(*tokenizer_, wrong);
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(ids.status().message().find("boi"), std::string::npos) << ids.status();
}

}  // namespace
}  // namespace argen::nextstep
