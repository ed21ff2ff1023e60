// The Lumina family's tensor map on the CPU backend against HF transformers'
// ChameleonForConditionalGeneration (tests/goldens/chameleon, made by
// tools/goldens/make_chameleon_goldens.py): prefill and KV-decode logits of a
// CFG pair whose rows differ in length (the conditional prompt + header, and
// the header alone, as Lumina-mGPT guides), over the image-token columns, for
// the HF q/k-norm layout, Lumina-mGPT's [model_parallel_size, head_dim] one
// and swin-norm with GQA. Relative error 1e-4 in fp32.
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/families/lumina/chameleon_vocab.h"
#include "engine/families/lumina/lumina_config.h"
#include "engine/families/lumina/lumina_spec.h"
#include "engine/families/lumina/tests/test_util.h"
#include "engine/kv/kv_manager.h"
#include "engine/model/backend_registry.h"
#include "engine/model/weight_source.h"
#include "engine/sparse/policy_params.h"
#include "gtest/gtest.h"
#include "tests/support/golden_files.h"

namespace argen::lumina {
namespace {

using test_support::ReadF32;
using testing::ReadJson;
using testing::RelativeError;
using testing::SourceDir;

constexpr double kTolerance = 1e-4;

class LuminaLogitsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LuminaLogitsTest, PairOfUnequalRowsMatchesHfChameleon) {
  const std::string rel = "tests/goldens/chameleon/" + GetParam();
  const std::string dir = SourceDir() + "/" + rel;
  const nlohmann::json golden = ReadJson(rel + "/goldens.json");
  absl::StatusOr<LuminaConfig> config = LoadLuminaConfig(dir);
  ASSERT_TRUE(config.ok()) << config.status();
  const int32_t first = golden["image_token_ids"][0].get<int32_t>();
  const int32_t count = golden["image_token_ids"][1].get<int32_t>() - first;
  absl::StatusOr<ImageTokenRange> range = BuildImageTokenRange(config->vocabulary_map, count, "vocabulary_map");
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ(range->first_id, first);
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::Checkpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  absl::StatusOr<QkNormRows> qk = ReadQkNormRows(**ckpt, *config);
  ASSERT_TRUE(qk.ok()) << qk.status();
  if (config->model_parallel_size > 1) {
    EXPECT_EQ(qk->q, config->model_parallel_size);  // the Lumina-mGPT layout, expanded on load
  } else {
    EXPECT_EQ(qk->q, config->num_attention_heads);
  }
  absl::StatusOr<model::ModelSpec> spec = LuminaSpec(*config, range->first_id, range->count, *qk);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(model::ValidateTensors(**ckpt, *spec).ok()) << model::ValidateTensors(**ckpt, *spec);
  model::BackendOptions options;
  options.max_prompt_tokens = 64;
  absl::StatusOr<std::unique_ptr<model::Backend>> backend =
      model::CreateCpuBackend(*spec, model::CheckpointWeights(std::move(*ckpt)), options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  model::Backend& be = **backend;
  kv::KvManager kv(be);

  const int32_t vocab = golden["vocab_size"].get<int32_t>();
  const std::vector<float> all = ReadF32(dir + "/" + golden["logits_file"].get<std::string>());
  auto expected = [&](int32_t row) {
    return std::vector<float>(all.begin() + int64_t{row} * vocab + first,
                              all.begin() + int64_t{row} * vocab + first + count);
  };
  const nlohmann::json& cond = golden["sequences"]["cond"];
  const nlohmann::json& uncond = golden["sequences"]["uncond"];
  const auto cond_ids = cond["ids"].get<std::vector<int32_t>>();
  const auto uncond_ids = uncond["ids"].get<std::vector<int32_t>>();
  const int32_t cp = cond["prefill"].get<int32_t>(), up = uncond["prefill"].get<int32_t>();
  const int32_t steps = static_cast<int32_t>(cond_ids.size()) - cp;
  ASSERT_EQ(steps, static_cast<int32_t>(uncond_ids.size()) - up);
  absl::StatusOr<sparse::ResolvedPolicy> dense = sparse::ResolvePolicy({}, steps + 1);
  ASSERT_TRUE(dense.ok());
  std::vector<model::RowId> rows = {*kv.AllocateRow(cp, *dense), *kv.AllocateRow(up, *dense)};
  EXPECT_TRUE(kv.CanPlace(kv::PlacementSizes(be, cp, up, *dense, 1, kv::Sharing::kNone)));

  std::vector<int32_t> tokens(cond_ids.begin(), cond_ids.begin() + cp);
  tokens.insert(tokens.end(), uncond_ids.begin(), uncond_ids.begin() + up);
  const std::vector<int32_t> offsets = {0, cp, cp + up};
  const std::vector<model::SamplingSpec> sampling(1);
  std::vector<int32_t> sampled(1, -1);
  std::vector<float> logits(2 * count);
  ASSERT_TRUE(be.Prefill({rows, offsets, tokens, sampling}, {sampled, logits.data()}).ok());
  const int32_t c0 = cond["first_row"].get<int32_t>(), u0 = uncond["first_row"].get<int32_t>();
  EXPECT_LE(RelativeError(logits.data(), expected(c0 + cp - 1)), kTolerance) << "prefill cond";
  EXPECT_LE(RelativeError(logits.data() + count, expected(u0 + up - 1)), kTolerance) << "prefill uncond";
  for (int32_t s = 0; s < steps; ++s) {
    // Both rows are fed the same token (ids 67 and 11 lie outside the image range: forced tokens).
    ASSERT_EQ(cond_ids[cp + s], uncond_ids[up + s]);
    const std::vector<int32_t> input = {cond_ids[cp + s]}, step = {s};
    ASSERT_TRUE(be.Decode({rows, input, step, sampling}, {sampled, logits.data()}).ok());
    EXPECT_LE(RelativeError(logits.data(), expected(c0 + cp + s)), kTolerance) << "decode cond " << s;
    EXPECT_LE(RelativeError(logits.data() + count, expected(u0 + up + s)), kTolerance) << "decode uncond " << s;
  }
  for (model::RowId r : rows) kv.FreeRow(r);
  EXPECT_EQ(kv.BytesInUse(), 0);
}

INSTANTIATE_TEST_SUITE_P(Variants, LuminaLogitsTest,
                         ::testing::Values("tiny-chameleon", "tiny-chameleon-lumina", "tiny-chameleon-swin"));

TEST(LuminaSpecTest, QkNormRowsThatDoNotDivideTheHeadsAreRefusedByName) {
  const std::string dir = SourceDir() + "/tests/goldens/chameleon/tiny-chameleon-lumina";
  absl::StatusOr<LuminaConfig> config = LoadLuminaConfig(dir);
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::Checkpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  LuminaConfig three = *config;
  three.num_attention_heads = 3;  // 2 stored rows cannot serve 3 heads
  absl::StatusOr<QkNormRows> rows = ReadQkNormRows(**ckpt, three);
  ASSERT_FALSE(rows.ok());
  EXPECT_NE(rows.status().message().find("model.layers.0.self_attn.q_norm.weight"), std::string::npos) << rows.status();
}

}  // namespace
}  // namespace argen::lumina
