// The Emu3 family's tensor map on the CPU backend against transformers'
// Emu3ForConditionalGeneration (tests/goldens/tiny/emu3-goldens, made by
// tools/goldens/make_emu3_goldens.py) and BAAI's own Emu3ForCausalLM
// (baai_logits.f32, tools/goldens/make_emu3_baai_goldens.py, same
// sequences): prefill and KV-decode logits of the
// family's own cond / uncond pair (caption + positive suffix, and the
// negative prompt; rows of unequal length) through two rows of codes with
// their forced row ends, over the visual-token columns, from both layouts
// (BAAI's names and transformers' as saved). Relative error 1e-4 in fp32.
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/families/emu3/emu3_config.h"
#include "engine/families/emu3/emu3_spec.h"
#include "engine/kv/kv_manager.h"
#include "engine/model/backend_registry.h"
#include "engine/model/weight_source.h"
#include "engine/sparse/policy_params.h"
#include "gtest/gtest.h"
#include "tests/support/golden_files.h"

namespace argen::emu3 {
namespace {

using test_support::ReadF32;
using test_support::ReadJson;
using test_support::RelativeError;
using test_support::SourceDir;

constexpr double kTolerance = 1e-4;

class Emu3LogitsTest : public ::testing::TestWithParam<std::string> {};

TEST_P(Emu3LogitsTest, PairOfUnequalRowsMatchesTransformers) {
  const std::string dir = SourceDir() + "/tests/goldens/tiny/" + GetParam();
  const std::string gold = SourceDir() + "/tests/goldens/tiny/emu3-goldens";
  const nlohmann::json golden = ReadJson("tests/goldens/tiny/emu3-goldens/goldens.json");
  absl::StatusOr<Emu3Config> config = LoadEmu3Config(dir);
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::Checkpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  absl::StatusOr<Emu3TensorNames> names = FindEmu3TensorNames(**ckpt, config->layout);
  ASSERT_TRUE(names.ok()) << names.status();
  const int32_t first = golden["first_visual_id"].get<int32_t>();
  const int32_t count = golden["codebook_size"].get<int32_t>();
  absl::StatusOr<model::ModelSpec> spec = Emu3Spec(*config, *names, first, count);
  ASSERT_TRUE(spec.ok()) << spec.status();
  ASSERT_TRUE(model::ValidateTensors(**ckpt, *spec).ok()) << model::ValidateTensors(**ckpt, *spec);
  model::BackendOptions options;
  options.max_prompt_tokens = 128;
  absl::StatusOr<std::unique_ptr<model::Backend>> backend =
      model::CreateCpuBackend(*spec, model::CheckpointWeights(std::move(*ckpt)), options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  model::Backend& be = **backend;
  kv::KvManager kv(be);

  const int32_t vocab = golden["vocab_size"].get<int32_t>();
  const std::vector<float> all = ReadF32(gold + "/" + golden["logits_file"].get<std::string>());
  const nlohmann::json baai_golden = ReadJson("tests/goldens/tiny/emu3-goldens/baai_goldens.json");
  const std::vector<float> baai = ReadF32(gold + "/" + baai_golden["logits_file"].get<std::string>());
  ASSERT_EQ(baai.size(), all.size());
  auto row_of = [&](const std::vector<float>& logits, int32_t row) {
    return std::vector<float>(logits.begin() + int64_t{row} * vocab + first,
                              logits.begin() + int64_t{row} * vocab + first + count);
  };
  auto expected = [&](int32_t row) { return row_of(all, row); };
  auto expected_baai = [&](int32_t row) { return row_of(baai, row); };
  const nlohmann::json& cond = golden["sequences"]["cond"];
  const nlohmann::json& uncond = golden["sequences"]["uncond"];
  const auto cond_ids = cond["ids"].get<std::vector<int32_t>>();
  const auto uncond_ids = uncond["ids"].get<std::vector<int32_t>>();
  const int32_t cp = cond["prefill"].get<int32_t>(), up = uncond["prefill"].get<int32_t>();
  ASSERT_NE(cp, up);
  const int32_t steps = static_cast<int32_t>(cond_ids.size()) - cp;
  absl::StatusOr<sparse::ResolvedPolicy> dense = sparse::ResolvePolicy({}, steps + 1);
  ASSERT_TRUE(dense.ok());
  std::vector<model::RowId> rows = {*kv.AllocateRow(cp, *dense), *kv.AllocateRow(up, *dense)};

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
  EXPECT_LE(RelativeError(logits.data(), expected_baai(c0 + cp - 1)), kTolerance) << "prefill cond, BAAI";
  EXPECT_LE(RelativeError(logits.data() + count, expected_baai(u0 + up - 1)), kTolerance) << "prefill uncond, BAAI";
  for (int32_t s = 0; s < steps; ++s) {
    ASSERT_EQ(cond_ids[cp + s], uncond_ids[up + s]);
    const std::vector<int32_t> input = {cond_ids[cp + s]}, step = {s};
    ASSERT_TRUE(be.Decode({rows, input, step, sampling}, {sampled, logits.data()}).ok());
    EXPECT_LE(RelativeError(logits.data(), expected(c0 + cp + s)), kTolerance) << "decode cond " << s;
    EXPECT_LE(RelativeError(logits.data() + count, expected(u0 + up + s)), kTolerance) << "decode uncond " << s;
    EXPECT_LE(RelativeError(logits.data(), expected_baai(c0 + cp + s)), kTolerance) << "decode cond, BAAI " << s;
    EXPECT_LE(RelativeError(logits.data() + count, expected_baai(u0 + up + s)), kTolerance)
        << "decode uncond, BAAI " << s;
  }
  for (model::RowId r : rows) kv.FreeRow(r);
  EXPECT_EQ(kv.BytesInUse(), 0);
}

INSTANTIATE_TEST_SUITE_P(Layouts, Emu3LogitsTest, ::testing::Values("tiny-emu3-gen", "tiny-emu3-gen-hf"),
                         [](const ::testing::TestParamInfo<std::string>& p) {
                           return p.param == "tiny-emu3-gen" ? std::string("Baai") : std::string("Transformers");
                         });

}  // namespace
}  // namespace argen::emu3
