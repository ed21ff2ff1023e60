// The generation loop end to end on the CPU with the tiny Emu3 checkpoints:
// the row end is recorded at every row end and nowhere else, every other
// token is a visual token, both layouts make the same tokens for the same
// seed (same weights, same ids), a request of another size (40 x 24: 3 rows
// of 5 codes) runs on its own layout and decodes to that size, an unknown
// size is refused naming `width` and the rule, every sparsity policy (ssd
// aside: it needs a head classification) runs on the row-break grid, and
// prompt-KV sharing across requests gives the same tokens.
#include <memory>
#include <string>
#include <vector>

#include "engine/families/emu3/emu3_prompt.h"
#include "engine/model/create_engine.h"
#include "engine/request_rules.h"
#include "engine/sparse/policy_params.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/golden_files.h"

namespace argen::emu3 {
namespace {

using test_support::ReadJson;
using test_support::SourceDir;

std::unique_ptr<model::GenericEngine> MakeEngine(const std::string& name, bool share_across_requests = false) {
  engine::EngineOptions options;
  options.model_dir = SourceDir() + "/tests/goldens/tiny/" + name;
  options.threads = 2;
  options.share_prompt_kv_across_requests = share_across_requests;
  absl::StatusOr<std::unique_ptr<model::GenericEngine>> e = model::CreateGenericEngine(options);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? std::move(*e) : nullptr;
}

engine::GenerationRequest Request(const std::string& prompt, uint64_t seed, int32_t width = 0, int32_t height = 0) {
  engine::GenerationRequest r;
  r.prompt = prompt;
  r.num_images = 1;
  r.width = width;
  r.height = height;
  r.sampling.cfg_weight = kDefaultCfgWeight;
  r.sampling.top_k = 0;
  r.sampling.seed = seed;
  return r;
}

std::vector<std::vector<std::vector<int32_t>>> RunToEnd(model::GenericEngine& e,
                                                        const std::vector<engine::GenerationRequest>& requests) {
  std::vector<engine::GroupId> ids;
  for (const auto& r : requests) {
    absl::StatusOr<engine::PreparedRequest> p = e.Prepare(r);
    EXPECT_TRUE(p.ok()) << p.status();
    if (!p.ok()) return {};
    absl::StatusOr<engine::GroupId> id = e.Add(*p);
    EXPECT_TRUE(id.ok()) << id.status();
    ids.push_back(*id);
  }
  for (int32_t step = 0; step < engine::MaxImageTokens(e.info()) + 1; ++step) {
    absl::StatusOr<engine::StepReport> rep = e.Step();
    EXPECT_TRUE(rep.ok()) << rep.status();
  }
  std::vector<std::vector<std::vector<int32_t>>> out;
  for (engine::GroupId id : ids) {
    absl::StatusOr<engine::GroupState> s = e.State(id);
    EXPECT_TRUE(s.ok() && s->finished);
    out.push_back(s->tokens);
    e.Remove(id);
  }
  return out;
}

void ExpectRows(const std::vector<int32_t>& tokens, int32_t w, int32_t h) {
  const nlohmann::json g = ReadJson("tests/goldens/tiny/emu3-goldens/goldens.json");
  const int32_t row_end = g["ids"][kRowEndToken].get<int32_t>();
  const int32_t first = g["first_visual_id"].get<int32_t>(), codes = g["codebook_size"].get<int32_t>();
  ASSERT_EQ(static_cast<int32_t>(tokens.size()), h * (w + 1) - 1);
  for (size_t t = 0; t < tokens.size(); ++t) {
    if (static_cast<int32_t>(t) % (w + 1) == w) {
      EXPECT_EQ(tokens[t], row_end) << t;
    } else {
      EXPECT_GE(tokens[t], first) << t;
      EXPECT_LT(tokens[t], first + codes) << t;
    }
  }
}

TEST(Emu3EngineTest, BothLayoutsMakeTheSameRowsAndImagesOfTheRequestedSize) {
  std::unique_ptr<model::GenericEngine> baai = MakeEngine("tiny-emu3-gen");
  std::unique_ptr<model::GenericEngine> hf = MakeEngine("tiny-emu3-gen-hf");
  ASSERT_NE(baai, nullptr);
  ASSERT_NE(hf, nullptr);
  EXPECT_EQ(hf->info().family, "emu3");
  EXPECT_EQ(hf->info().image_vocab, 64);
  const auto a = RunToEnd(*baai, {Request("a red circle", 5), Request("a blue square", 9, 40, 24)});
  const auto b = RunToEnd(*hf, {Request("a red circle", 5), Request("a blue square", 9, 40, 24)});
  ASSERT_EQ(a.size(), 2u);
  ASSERT_EQ(b.size(), 2u);
  ExpectRows(a[0][0], 4, 4);
  ExpectRows(a[1][0], 5, 3);
  EXPECT_EQ(a, b);
  absl::StatusOr<std::vector<engine::RgbImage>> images = hf->DecodeImages({a[0][0], a[1][0]});
  ASSERT_TRUE(images.ok()) << images.status();
  EXPECT_EQ((*images)[0].width, 32);
  EXPECT_EQ((*images)[0].height, 32);
  EXPECT_EQ((*images)[1].width, 40);
  EXPECT_EQ((*images)[1].height, 24);
  absl::StatusOr<std::vector<engine::RgbImage>> same = baai->DecodeImages({a[1][0]});
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ((*same)[0].rgb, (*images)[1].rgb);

  absl::StatusOr<engine::PreparedRequest> refused = hf->Prepare(Request("x", 1, 48, 48));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message().rfind("width", 0), 0u) << refused.status();
  EXPECT_NE(refused.status().message().find("the rule: width and height multiples of 8"), std::string::npos)
      << refused.status();
}

TEST(Emu3EngineTest, EverySparsityPolicyRunsOnTheRowBreakGrid) {
  std::unique_ptr<model::GenericEngine> e = MakeEngine("tiny-emu3-gen-hf");
  ASSERT_NE(e, nullptr);
  for (sparse::PolicyKind kind : sparse::kAllPolicyKinds) {
    if (kind == sparse::PolicyKind::kSsd) continue;  // needs the model's ssd_heads.json
    engine::GenerationRequest r = Request("a green triangle", 3, 40, 24);
    r.policy.kind = kind;
    r.policy.sparsity = kind == sparse::PolicyKind::kDense ? 0.0 : 0.5;
    const auto out = RunToEnd(*e, {r});
    ASSERT_EQ(out.size(), 1u) << sparse::PolicyName(kind);
    ExpectRows(out[0][0], 5, 3);
  }
}

TEST(Emu3EngineTest, PromptKvSharedAcrossRequestsGivesTheSameTokens) {
  std::unique_ptr<model::GenericEngine> plain = MakeEngine("tiny-emu3-gen-hf");
  std::unique_ptr<model::GenericEngine> shared = MakeEngine("tiny-emu3-gen-hf", /*share_across_requests=*/true);
  ASSERT_NE(plain, nullptr);
  ASSERT_NE(shared, nullptr);
  engine::GenerationRequest two = Request("a red circle", 11);
  two.num_images = 2;
  const auto a = RunToEnd(*plain, {two, Request("a red circle", 12)});
  const auto b = RunToEnd(*shared, {two, Request("a red circle", 12)});
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace argen::emu3
