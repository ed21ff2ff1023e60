// The Anole family against transformers (tests/goldens/tiny/tiny-anole-*,
// made by tools/goldens/make_anole_tiny.py): one tiny random model in both
// published layouts. Through the family's own load (LoadAnole: the -hf
// conversion read as stored, Meta's consolidated.pth through the converter's
// q/k permutation) the CPU backend's prefill and KV-decode logits of Anole's
// CFG pair (<s> caption <reserved08706> <racm3:break> codes..., and
// <s> <racm3:break> codes...) match ChameleonForConditionalGeneration's over
// the image tokens (relative error 1e-4 in fp32), and the prompt recipe gives
// Anole's TokenManager ids for each layout's tokenizer.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/families/anole/anole_family.h"
#include "engine/families/anole/meta_checkpoint.h"
#include "engine/kv/kv_manager.h"
#include "engine/model/backend_registry.h"
#include "engine/model/weight_source.h"
#include "gtest/gtest.h"
#include "tests/support/cfg_pair_logits.h"
#include "tests/support/golden_files.h"

namespace argen::anole {
namespace {

using test_support::ExpectCfgPairLogitsMatchGolden;
using test_support::ImageTokenColumnsOf;
using test_support::ReadJson;
using test_support::SourceDir;

constexpr double kTolerance = 1e-4;
const char kHf[] = "tests/goldens/tiny/tiny-anole-hf";
const char kMeta[] = "tests/goldens/tiny/tiny-anole-meta";
// The same model at head_dim 16 (the CUDA backend's shapes; tools/goldens/make_anole_tiny_cuda.py), reading
// the tokenizer and VQGAN of tiny-anole-meta.
const char kCudaHf[] = "tests/goldens/tiny/tiny-anole-cuda-hf";
const char kCudaMeta[] = "tests/goldens/tiny/tiny-anole-cuda-meta";

bool CudaShape(const std::string& which) { return which.rfind("cuda-", 0) == 0; }

// The folder of `which` layout's goldens (goldens.json, logits.f32): the -hf one of its shape.
std::string GoldenDir(const std::string& which) { return CudaShape(which) ? kCudaHf : kHf; }

// Each layout's directory and family options (the -hf folders, and the head_dim 16 ones, read the VQGAN from
// Meta's tokenizer folder).
std::pair<std::string, families::FamilyOptions> Layout(const std::string& which) {
  const families::FamilyOptions shared = {{"vqgan_dir", "../tiny-anole-meta/tokenizer"}};
  if (which == "hf") return {SourceDir() + "/" + kHf, shared};
  if (which == "cuda-hf") return {SourceDir() + "/" + kCudaHf, shared};
  if (which == "cuda-meta") return {SourceDir() + "/" + kCudaMeta, shared};
  return {SourceDir() + "/" + kMeta, {}};
}

absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> Open(const families::FamilyModel& m, const std::string& dir) {
  return m.open_checkpoint ? m.open_checkpoint() : checkpoint::Checkpoint::Open(dir);
}

class AnoleLayoutTest : public ::testing::TestWithParam<std::string> {};

TEST_P(AnoleLayoutTest, CfgPairLogitsMatchTransformers) {
  const auto [dir, options] = Layout(GetParam());
  const nlohmann::json golden = ReadJson(GoldenDir(GetParam()) + "/goldens.json");
  absl::StatusOr<families::FamilyModel> m = LoadAnole(dir, options);
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = Open(*m, dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  ASSERT_TRUE(model::ValidateTensors(**ckpt, m->spec).ok()) << model::ValidateTensors(**ckpt, m->spec);
  const auto [first, count] = ImageTokenColumnsOf(golden);
  ASSERT_EQ(m->spec.input.sampled_offset, first);
  ASSERT_EQ(m->spec.output.head.weight.rows, count);

  model::BackendOptions backend_options;
  backend_options.max_prompt_tokens = 64;
  absl::StatusOr<std::unique_ptr<model::Backend>> backend =
      model::CreateCpuBackend(m->spec, model::CheckpointWeights(std::move(*ckpt)), backend_options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  model::Backend& be = **backend;
  kv::KvManager kv(be);

  ASSERT_NO_FATAL_FAILURE(ExpectCfgPairLogitsMatchGolden(
      be, kv, golden, SourceDir() + "/" + GoldenDir(GetParam()) + "/" + golden["logits_file"].get<std::string>(),
      kTolerance));
}

TEST_P(AnoleLayoutTest, PromptIdsAreAnolesTokenManagers) {
  const auto [dir, options] = Layout(GetParam());
  const nlohmann::json golden = ReadJson(GoldenDir(GetParam()) + "/goldens.json");
  absl::StatusOr<families::FamilyModel> m = LoadAnole(dir, options);
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<model::PromptEncoder> encoder = m->make_prompt();
  ASSERT_TRUE(encoder.ok()) << encoder.status();
  for (const nlohmann::json& p : golden["prompts"]) {
    auto ids = (*encoder)({p["caption"].get<std::string>(), ""});
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(ids->first, p["ids"].get<std::vector<int32_t>>()) << p["caption"];
    EXPECT_EQ(ids->second, p["uncond_ids"].get<std::vector<int32_t>>()) << p["caption"];
  }
  // A negative prompt is guided against as its own turn, built as the caption's.
  auto with_negative = (*encoder)({"a red cube", "a red cube"});
  ASSERT_TRUE(with_negative.ok()) << with_negative.status();
  EXPECT_EQ(with_negative->first, with_negative->second);
  auto empty = (*encoder)({"", ""});
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("prompt"), std::string::npos) << empty.status();
}

INSTANTIATE_TEST_SUITE_P(Layouts, AnoleLayoutTest, ::testing::Values("hf", "meta", "cuda-hf", "cuda-meta"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

TEST(AnoleMetaCheckpointTest, RotaryRowsFollowTheConvertersPermute) {
  // head_dim 8: HF rows (first half, second half) = Meta's even, odd rows.
  const std::vector<int64_t> want = {0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15};
  for (int64_t r = 0; r < 16; ++r) EXPECT_EQ(MetaRowOfHfRow(r, 8), want[r]) << r;
}

}  // namespace
}  // namespace argen::anole
