// The CPU backend against HF transformers' LlamaModel + PyTorch Janus heads
// (tests/goldens/llama, tools/goldens/make_llama_goldens.py): prefill and
// batched decode logits of CFG pairs with different prompt lengths, the
// second pair joining two steps after the first; MHA, GQA and a non-default
// rope_theta. Also the sampler's distributions against torch.
#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/cpu/tests/golden_util.h"
#include "engine/kv/kv_manager.h"
#include "engine/model/sampler.h"
#include "engine/sparse/policy_params.h"

namespace argen::cpu {
namespace {

using testing::LoadTinyBackend;
using testing::ReadJson;
using testing::RelativeError;

constexpr double kTolerance = 1e-4;

class LlamaGoldenTest : public ::testing::TestWithParam<std::string> {};

struct Pair {
  std::vector<model::RowId> rows;
  nlohmann::json golden;
  int32_t next_step = 0;
};

void ExpectLogits(const std::vector<float>& row_logits, int32_t vocab, int32_t row_in_batch,
                  const nlohmann::json& expected, const std::string& what) {
  const std::vector<float> want = expected.get<std::vector<float>>();
  ASSERT_EQ(static_cast<int32_t>(want.size()), vocab);
  const double err = RelativeError(row_logits.data() + int64_t{row_in_batch} * vocab, want);
  EXPECT_LE(err, kTolerance) << what;
}

void CheckPrefillAndBatchedDecode(const std::string& case_name, bool parallel_rows);

TEST_P(LlamaGoldenTest, PrefillAndBatchedDecodeMatchTransformers) { CheckPrefillAndBatchedDecode(GetParam(), false); }

// The same with the per-row attention forced onto 3 threads.
TEST_P(LlamaGoldenTest, ParallelRowsMatchTransformers) { CheckPrefillAndBatchedDecode(GetParam(), true); }

void CheckPrefillAndBatchedDecode(const std::string& case_name, bool parallel_rows) {
  const nlohmann::json golden = ReadJson("tests/goldens/llama/" + case_name + ".json");
  model::BackendOptions options;
  if (parallel_rows) options.threads = 3;
  testing::LoadedBackend loaded =
      LoadTinyBackend(golden["checkpoint"].get<std::string>(), golden["rope_theta"].get<float>(), options);
  ASSERT_NE(loaded.backend, nullptr);
  if (parallel_rows) dynamic_cast<CpuBackend&>(*loaded.backend).set_min_parallel_work(0);
  model::Backend& backend = *loaded.backend;
  kv::KvManager kv(backend);
  const int32_t vocab = loaded.spec.logits();
  absl::StatusOr<sparse::ResolvedPolicy> dense = sparse::ResolvePolicy({}, 64);
  ASSERT_TRUE(dense.ok()) << dense.status();

  std::vector<Pair> pairs;
  for (const nlohmann::json& g : golden["pairs"]) pairs.push_back({{}, g, 0});

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
    ExpectLogits(logits, vocab, 0, p.golden["cond_logits"][0], "prefill cond");
    ExpectLogits(logits, vocab, 1, p.golden["uncond_logits"][0], "prefill uncond");
    EXPECT_GE(sampled[0], 0);
    EXPECT_LT(sampled[0], vocab);
  };

  // Decodes one step for the given pairs together.
  auto decode = [&](std::vector<Pair*> batch) {
    std::vector<model::RowId> rows;
    std::vector<int32_t> tokens, steps;
    for (Pair* p : batch) {
      rows.insert(rows.end(), p->rows.begin(), p->rows.end());
      tokens.push_back(p->golden["image_tokens"][p->next_step].get<int32_t>());
      steps.push_back(p->next_step);
    }
    const std::vector<model::SamplingSpec> sampling(batch.size());
    std::vector<int32_t> sampled(batch.size(), -1);
    std::vector<float> logits(rows.size() * vocab);
    absl::Status s = backend.Decode({rows, tokens, steps, sampling}, {sampled, logits.data()});
    ASSERT_TRUE(s.ok()) << s;
    for (size_t i = 0; i < batch.size(); ++i) {
      Pair& p = *batch[i];
      const int32_t out_index = p.next_step + 1;
      ExpectLogits(logits, vocab, 2 * i, p.golden["cond_logits"][out_index],
                   "decode cond, output " + std::to_string(out_index));
      ExpectLogits(logits, vocab, 2 * i + 1, p.golden["uncond_logits"][out_index],
                   "decode uncond, output " + std::to_string(out_index));
      p.next_step += 1;
    }
  };

  ASSERT_EQ(pairs.size(), 2u);
  prefill(pairs[0]);
  decode({&pairs[0]});
  decode({&pairs[0]});
  prefill(pairs[1]);  // joins at a different step, with a longer prompt
  while (pairs[1].next_step < static_cast<int32_t>(pairs[1].golden["image_tokens"].size())) {
    decode({&pairs[1], &pairs[0]});
  }
  EXPECT_EQ(pairs[0].next_step, 5);
  for (Pair& p : pairs) {
    for (model::RowId r : p.rows) kv.FreeRow(r);
  }
  EXPECT_EQ(kv.BytesInUse(), 0);
}

TEST_P(LlamaGoldenTest, SamplerDistributionsMatchTorch) {
  const nlohmann::json golden = ReadJson("tests/goldens/llama/" + GetParam() + ".json");
  for (const nlohmann::json& pair : golden["pairs"]) {
    const auto cond = pair["cond_logits"][0].get<std::vector<float>>();
    const auto uncond = pair["uncond_logits"][0].get<std::vector<float>>();
    model::HostSampler sampler(static_cast<int32_t>(cond.size()));
    for (const nlohmann::json& s : pair["sampling_from_prefill"]) {
      model::SamplingSpec spec;
      spec.temperature = s["temperature"].get<float>();
      spec.top_k = s["top_k"].get<int32_t>();
      spec.top_p = s["top_p"].get<float>();
      spec.cfg_weight = s["cfg_weight"].get<float>();
      const auto want = s["probs"].get<std::vector<double>>();
      const int32_t token = sampler.Sample(cond.data(), uncond.data(), spec, 0.5f);
      EXPECT_GT(want[token], 0.0) << "drew a filtered token";
      for (size_t v = 0; v < want.size(); ++v) {
        EXPECT_NEAR(sampler.last_probs()[v], want[v], 1e-5) << "token " << v;
        EXPECT_EQ(sampler.last_probs()[v] > 0.0f, want[v] > 0.0) << "token " << v;
      }
    }
  }
}

TEST_P(LlamaGoldenTest, AttentionObserverSeesTransformersAttentionWeights) {
  const nlohmann::json golden = ReadJson("tests/goldens/llama/" + GetParam() + ".json");
  testing::LoadedBackend loaded =
      LoadTinyBackend(golden["checkpoint"].get<std::string>(), golden["rope_theta"].get<float>());
  ASSERT_NE(loaded.backend, nullptr);
  auto* cpu = dynamic_cast<CpuBackend*>(loaded.backend.get());
  ASSERT_NE(cpu, nullptr);
  const nlohmann::json& pair = golden["pairs"][0];
  const auto cond = pair["cond_ids"].get<std::vector<int32_t>>();
  const auto uncond = pair["uncond_ids"].get<std::vector<int32_t>>();
  const auto image_tokens = pair["image_tokens"].get<std::vector<int32_t>>();
  const nlohmann::json& want = pair["cond_decode_attentions"];  // [step][layer][head][key]
  absl::StatusOr<sparse::ResolvedPolicy> dense = sparse::ResolvePolicy({}, 64);
  ASSERT_TRUE(dense.ok());
  std::vector<model::RowId> rows;
  kv::KvManager kv(*loaded.backend);
  for (int i = 0; i < 2; ++i) rows.push_back(*kv.AllocateRow(static_cast<int32_t>(cond.size()), *dense));

  int32_t observed = 0;
  double max_error = 0.0;
  cpu->SetAttentionObserver([&](const AttentionObservation& obs) {
    if (obs.row != rows[0]) return;
    ++observed;
    EXPECT_EQ(obs.prompt_len, static_cast<int32_t>(cond.size()));
    ASSERT_EQ(obs.decode_positions.size(), static_cast<size_t>(obs.step + 1));
    for (int32_t i = 0; i <= obs.step; ++i) EXPECT_EQ(obs.decode_positions[i], i);
    const auto expected = want[obs.step][obs.layer][obs.head].get<std::vector<double>>();
    ASSERT_EQ(obs.probs.size(), expected.size());
    for (size_t k = 0; k < expected.size(); ++k) {
      max_error = std::max(max_error, std::abs(obs.probs[k] - expected[k]));
    }
  });
  std::vector<int32_t> tokens = cond;
  tokens.insert(tokens.end(), uncond.begin(), uncond.end());
  const std::vector<int32_t> offsets = {0, static_cast<int32_t>(cond.size()), static_cast<int32_t>(tokens.size())};
  const std::vector<model::SamplingSpec> sampling(1);
  std::vector<int32_t> sampled(1);
  ASSERT_TRUE(loaded.backend->Prefill({rows, offsets, tokens, sampling}, {sampled, nullptr}).ok());
  EXPECT_EQ(observed, 0) << "prefill is not observed";
  for (int32_t t = 0; t < static_cast<int32_t>(image_tokens.size()); ++t) {
    const std::vector<int32_t> token = {image_tokens[t]}, step = {t};
    ASSERT_TRUE(loaded.backend->Decode({rows, token, step, sampling}, {sampled, nullptr}).ok());
  }
  EXPECT_EQ(observed,
            static_cast<int32_t>(image_tokens.size()) * loaded.spec.stack.num_layers * loaded.spec.stack.num_heads);
  EXPECT_LE(max_error, 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Tiny, LlamaGoldenTest, ::testing::Values("mha", "gqa", "gqa_theta500k"));

}  // namespace
}  // namespace argen::cpu
