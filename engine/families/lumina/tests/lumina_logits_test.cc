// The Lumina family's tensor map on the CPU backend against HF transformers'
// ChameleonForConditionalGeneration (tests/goldens/chameleon, made by
// tools/goldens/make_chameleon_goldens.py): prefill and KV-decode logits of a
// CFG pair whose rows differ in length (the conditional prompt + header, and
// the header alone, as Lumina-mGPT guides), over the image-token columns, for
// the HF q/k-norm layout, Lumina-mGPT's [model_parallel_size, head_dim] one
// and swin-norm with GQA. Relative error 1e-4 in fp32.
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
#include "tests/support/cfg_pair_logits.h"

namespace argen::lumina {
namespace {

using test_support::ExpectCfgPairLogitsMatchGolden;
using test_support::ImageTokenColumnsOf;
using testing::ReadJson;
using testing::SourceDir;

constexpr double kTolerance = 1e-4;

class LuminaLogitsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(LuminaLogitsTest, PairOfUnequalRowsMatchesHfChameleon) {
  const std::string rel = "tests/goldens/chameleon/" + GetParam();
  const std::string dir = SourceDir() + "/" + rel;
  const nlohmann::json golden = ReadJson(rel + "/goldens.json");
  absl::StatusOr<LuminaConfig> config = LoadLuminaConfig(dir);
  ASSERT_TRUE(config.ok()) << config.status();
  const auto [first, count] = ImageTokenColumnsOf(golden);
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

  ASSERT_NO_FATAL_FAILURE(ExpectCfgPairLogitsMatchGolden(
      be, kv, golden, dir + "/" + golden["logits_file"].get<std::string>(), kTolerance,
      [&](int32_t cp, int32_t up, const sparse::ResolvedPolicy& dense) {
        EXPECT_TRUE(kv.CanPlace(kv::PlacementSizes(be, cp, up, dense, 1, kv::Sharing::kNone)));
      }));
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
