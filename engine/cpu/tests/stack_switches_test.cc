// The CPU backend's decoder-stack switches against independent references
// (tests/goldens/stack, tools/goldens/make_stack_goldens.py): QK-norm before
// RoPE with pre-norm and GQA, and with swin-norm and MHA at another
// rope_theta, against HF transformers' ChameleonModel; LayerNorm block norms
// against the script's PyTorch restatement (itself checked against
// ChameleonModel and LlamaModel). Input stage: embedding rows by id (some
// outside the logit range, as forced tokens are); output stage: lm_head rows
// restricted to an id range. Prefill and batched decode of two CFG pairs with
// different prompt lengths, the second joining two steps later.
#include <string>
#include <vector>

#include "engine/cpu/tests/golden_util.h"
#include "engine/kv/kv_manager.h"
#include "engine/model/backend_registry.h"
#include "engine/model/tests/stack_golden.h"
#include "engine/model/weight_source.h"
#include "engine/sparse/policy_params.h"

namespace argen::cpu {
namespace {

using testing::ReadJson;
using testing::RelativeError;

constexpr double kTolerance = 1e-4;

class StackSwitchesTest : public ::testing::TestWithParam<std::string> {};

void ExpectLogits(const std::vector<float>& logits, int32_t vocab, int32_t row, const nlohmann::json& expected,
                  const std::string& what) {
  const std::vector<float> want = expected.get<std::vector<float>>();
  ASSERT_EQ(static_cast<int32_t>(want.size()), vocab);
  EXPECT_LE(RelativeError(logits.data() + int64_t{row} * vocab, want), kTolerance) << what;
}

TEST_P(StackSwitchesTest, PrefillAndBatchedDecodeMatchTheReference) {
  const nlohmann::json golden = ReadJson("tests/goldens/stack/" + GetParam() + ".json");
  const model::ModelSpec spec = model::testing::StackGoldenSpec(golden);
  ASSERT_TRUE(model::CheckSpec(spec).ok()) << model::CheckSpec(spec);
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt =
      checkpoint::Checkpoint::Open(testing::SourceDir() + "/" + golden["checkpoint"].get<std::string>());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  ASSERT_TRUE(model::ValidateTensors(**ckpt, spec).ok()) << model::ValidateTensors(**ckpt, spec);
  model::BackendOptions options;
  options.max_prompt_tokens = 64;
  absl::StatusOr<std::unique_ptr<model::Backend>> loaded =
      model::CreateCpuBackend(spec, model::CheckpointWeights(std::move(*ckpt)), options);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  model::Backend& backend = **loaded;
  kv::KvManager kv(backend);
  const int32_t vocab = spec.logits();
  absl::StatusOr<sparse::ResolvedPolicy> dense = sparse::ResolvePolicy({}, 16);
  ASSERT_TRUE(dense.ok());

  struct Pair {
    nlohmann::json golden;
    std::vector<model::RowId> rows;
    int32_t next_step = 0;
  };
  std::vector<Pair> pairs;
  for (const nlohmann::json& g : golden["pairs"]) pairs.push_back({g, {}, 0});

  auto prefill = [&](Pair& p) {
    const auto cond = p.golden["cond_ids"].get<std::vector<int32_t>>();
    const auto uncond = p.golden["uncond_ids"].get<std::vector<int32_t>>();
    for (int i = 0; i < 2; ++i) {
      absl::StatusOr<model::RowId> row = kv.AllocateRow(static_cast<int32_t>(cond.size()), *dense);
      ASSERT_TRUE(row.ok()) << row.status();
      p.rows.push_back(*row);
    }
    std::vector<int32_t> tokens = cond;
    tokens.insert(tokens.end(), uncond.begin(), uncond.end());
    const std::vector<int32_t> offsets = {0, static_cast<int32_t>(cond.size()), static_cast<int32_t>(tokens.size())};
    const std::vector<model::SamplingSpec> sampling(1);
    std::vector<int32_t> sampled(1, -1);
    std::vector<float> logits(2 * vocab);
    ASSERT_TRUE(backend.Prefill({p.rows, offsets, tokens, sampling}, {sampled, logits.data()}).ok());
    ExpectLogits(logits, vocab, 0, p.golden["cond_logits"][0], GetParam() + " prefill cond");
    ExpectLogits(logits, vocab, 1, p.golden["uncond_logits"][0], GetParam() + " prefill uncond");
  };
  auto decode = [&](std::vector<Pair*> batch) {
    std::vector<model::RowId> rows;
    std::vector<int32_t> inputs, steps;
    for (Pair* p : batch) {
      rows.insert(rows.end(), p->rows.begin(), p->rows.end());
      inputs.push_back(p->golden["inputs"][p->next_step].get<int32_t>());
      steps.push_back(p->next_step);
    }
    const std::vector<model::SamplingSpec> sampling(batch.size());
    std::vector<int32_t> sampled(batch.size(), -1);
    std::vector<float> logits(rows.size() * vocab);
    absl::Status s = backend.Decode({rows, inputs, steps, sampling}, {sampled, logits.data()});
    ASSERT_TRUE(s.ok()) << s;
    for (size_t i = 0; i < batch.size(); ++i) {
      Pair& p = *batch[i];
      const int32_t out = p.next_step + 1;
      ExpectLogits(logits, vocab, 2 * i, p.golden["cond_logits"][out],
                   GetParam() + " decode cond " + std::to_string(out));
      ExpectLogits(logits, vocab, 2 * i + 1, p.golden["uncond_logits"][out],
                   GetParam() + " decode uncond " + std::to_string(out));
      EXPECT_GE(sampled[i], 0);
      EXPECT_LT(sampled[i], vocab);
      p.next_step += 1;
    }
  };
  ASSERT_NO_FATAL_FAILURE(prefill(pairs[0]));
  ASSERT_NO_FATAL_FAILURE(decode({&pairs[0]}));
  ASSERT_NO_FATAL_FAILURE(decode({&pairs[0]}));
  ASSERT_NO_FATAL_FAILURE(prefill(pairs[1]));
  while (pairs[1].next_step < static_cast<int32_t>(pairs[1].golden["inputs"].size())) {
    ASSERT_NO_FATAL_FAILURE(decode({&pairs[1], &pairs[0]}));
  }
  EXPECT_EQ(pairs[0].next_step, 5);
  for (Pair& p : pairs)
    for (model::RowId r : p.rows) kv.FreeRow(r);
  EXPECT_EQ(kv.BytesInUse(), 0);
}

INSTANTIATE_TEST_SUITE_P(Switches, StackSwitchesTest,
                         ::testing::Values("chameleon_prenorm_gqa", "chameleon_swin_mha", "layernorm_prenorm_gqa"));

// The spec's own checks refuse a switch without its tensors.
TEST(StackSpecTest, QkNormNeedsItsTensorsAndRangesMustFit) {
  const nlohmann::json golden = ReadJson("tests/goldens/stack/chameleon_prenorm_gqa.json");
  model::ModelSpec spec = model::testing::StackGoldenSpec(golden);
  model::ModelSpec no_qk = spec;
  no_qk.layers[1].k_norm = {};
  EXPECT_FALSE(model::CheckSpec(no_qk).ok());
  model::ModelSpec off_range = spec;
  off_range.output.head.weight.row_begin = 70;  // 70 + 48 > 80 rows
  EXPECT_FALSE(model::CheckSpec(off_range).ok());
  model::ModelSpec bad_offset = spec;
  bad_offset.input.sampled_offset = 40;  // sampled ids 40..87 are not table rows
  EXPECT_FALSE(model::CheckSpec(bad_offset).ok());
}

}  // namespace
}  // namespace argen::cpu
