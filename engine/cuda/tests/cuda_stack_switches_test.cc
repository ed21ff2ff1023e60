// The CUDA backend's decoder-stack switches against the CPU backend (the f32
// reference, itself checked against HF ChameleonModel: engine/cpu/tests/
// stack_switches_test.cc) on the tests/goldens/stack checkpoints: QK-norm
// (HeadLayerNorm before RoPE) with pre-norm + GQA, swin-norm (AddNorm) + MHA at
// rope_theta 500000, LayerNorm block and final norms; the table input stage
// (no MLP) and a head restricted to an id range. Dense and a sparse policy,
// teacher-forced with the goldens' inputs. Also: the captured decode graphs
// sample exactly what eager launches sample with every switch on. Needs a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/kv/kv_manager.h"
#include "engine/model/backend_registry.h"
#include "engine/model/tests/stack_golden.h"
#include "engine/model/weight_source.h"
#include "engine/sparse/policy_params.h"
#include "nlohmann/json.hpp"

namespace argen::cuda {
namespace {

constexpr double kTolerance = 3e-2;  // ||cuda - x|| / ||x|| per row: bf16 weights and KV

std::string SourceDir() {
  const char* src = std::getenv("ARGEN_SOURCE_DIR");
  return src ? src : ".";
}

nlohmann::json Golden(const std::string& name) {
  std::ifstream in(SourceDir() + "/tests/goldens/stack/" + name + ".json");
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

std::unique_ptr<model::Backend> Make(const model::ModelSpec& spec, const nlohmann::json& golden, bool cuda) {
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt =
      checkpoint::Checkpoint::Open(SourceDir() + "/" + golden["checkpoint"].get<std::string>());
  EXPECT_TRUE(ckpt.ok()) << ckpt.status();
  if (!ckpt.ok()) return nullptr;
  model::BackendOptions options;
  options.max_batch_rows = 8;
  options.max_prompt_tokens = 64;
  options.kv_budget_bytes = 16 << 20;
  auto weights = model::CheckpointWeights(std::move(*ckpt));
  absl::StatusOr<std::unique_ptr<model::Backend>> b =
      cuda ? model::CreateCudaBackend(spec, weights, options) : model::CreateCpuBackend(spec, weights, options);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? *std::move(b) : nullptr;
}

double RowError(const float* got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (size_t v = 0; v < want.size(); ++v) {
    if (!std::isfinite(got[v])) return INFINITY;
    num += (got[v] - want[v]) * (got[v] - want[v]);
    den += double{want[v]} * want[v];
  }
  return std::sqrt(num / den);
}

struct Case {
  std::string golden;
  sparse::PolicyKind kind;
  double sparsity;
};

class CudaStackSwitchesTest : public ::testing::TestWithParam<Case> {};

TEST_P(CudaStackSwitchesTest, LogitsMatchTheCpuBackendAndTheReference) {
  const Case c = GetParam();
  const nlohmann::json golden = Golden(c.golden);
  const model::ModelSpec spec = model::testing::StackGoldenSpec(golden);
  std::unique_ptr<model::Backend> cpu = Make(spec, golden, false), gpu = Make(spec, golden, true);
  ASSERT_TRUE(cpu && gpu);
  const int32_t vocab = spec.logits();
  sparse::PolicyParams params;
  params.kind = c.kind;
  params.sparsity = c.sparsity;
  absl::StatusOr<sparse::ResolvedPolicy> policy = sparse::ResolvePolicy(params, 16);
  ASSERT_TRUE(policy.ok()) << policy.status();
  // Until a selection can take effect, a sparse policy attends what dense does
  // (the reference is dense); after it, the CUDA rows are held to the CPU's.
  const int32_t strict_until = c.kind == sparse::PolicyKind::kDense ? 1 << 20 : policy->n_att;
  const nlohmann::json& pair = golden["pairs"][0];
  const auto cond = pair["cond_ids"].get<std::vector<int32_t>>(),
             uncond = pair["uncond_ids"].get<std::vector<int32_t>>();
  kv::KvManager cpu_kv(*cpu), gpu_kv(*gpu);
  std::vector<model::RowId> rows[2];
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 2; ++i) {
      absl::StatusOr<model::RowId> r =
          (b == 0 ? cpu_kv : gpu_kv).AllocateRow(static_cast<int32_t>(cond.size()), *policy);
      ASSERT_TRUE(r.ok()) << r.status();
      rows[b].push_back(*r);
    }
  std::vector<int32_t> tokens = cond;
  tokens.insert(tokens.end(), uncond.begin(), uncond.end());
  const std::vector<int32_t> offsets = {0, static_cast<int32_t>(cond.size()), static_cast<int32_t>(tokens.size())};
  const std::vector<model::SamplingSpec> sampling(1);
  auto check = [&](const std::vector<float>(&logits)[2], int out, int32_t step) {
    for (int r = 0; r < 2; ++r) {
      const std::vector<float> cpu_row(logits[0].begin() + r * vocab, logits[0].begin() + (r + 1) * vocab);
      const double vs_cpu = RowError(logits[1].data() + r * vocab, cpu_row);
      ASSERT_TRUE(std::isfinite(vs_cpu)) << "output " << out << " row " << r;
      EXPECT_LE(vs_cpu, kTolerance) << c.golden << " output " << out << " row " << r;
      if (step < strict_until) {
        const auto want = (r == 0 ? pair["cond_logits"] : pair["uncond_logits"])[out].get<std::vector<float>>();
        EXPECT_LE(RowError(logits[1].data() + r * vocab, want), kTolerance)
            << c.golden << " vs reference, output " << out;
      }
    }
  };
  {
    std::vector<float> logits[2];
    for (int b = 0; b < 2; ++b) {
      std::vector<int32_t> sampled(1);
      logits[b].resize(2 * vocab);
      absl::Status s =
          (b == 0 ? *cpu : *gpu).Prefill({rows[b], offsets, tokens, sampling}, {sampled, logits[b].data()});
      ASSERT_TRUE(s.ok()) << s;
    }
    ASSERT_NO_FATAL_FAILURE(check(logits, 0, 0));
  }
  const auto inputs = pair["inputs"].get<std::vector<int32_t>>();
  for (int32_t t = 0; t < static_cast<int32_t>(inputs.size()); ++t) {
    std::vector<float> logits[2];
    for (int b = 0; b < 2; ++b) {
      std::vector<int32_t> sampled(1), ids = {inputs[t]}, steps = {t};
      logits[b].resize(2 * vocab);
      absl::Status s = (b == 0 ? *cpu : *gpu).Decode({rows[b], ids, steps, sampling}, {sampled, logits[b].data()});
      ASSERT_TRUE(s.ok()) << s;
      ASSERT_GE(sampled[0], 0);
      ASSERT_LT(sampled[0], vocab);
    }
    ASSERT_NO_FATAL_FAILURE(check(logits, t + 1, t));
  }
  EXPECT_EQ(gpu_kv.BytesInUse(), 2 * gpu->RowBytes(static_cast<int32_t>(cond.size()), *policy));
  for (model::RowId r : rows[1]) gpu_kv.FreeRow(r);
  EXPECT_EQ(gpu_kv.BytesInUse(), 0);
}

INSTANTIATE_TEST_SUITE_P(Switches, CudaStackSwitchesTest,
                         ::testing::Values(Case{"chameleon_prenorm_gqa", sparse::PolicyKind::kDense, 0.0},
                                           Case{"chameleon_swin_mha", sparse::PolicyKind::kDense, 0.0},
                                           Case{"layernorm_prenorm_gqa", sparse::PolicyKind::kDense, 0.0},
                                           Case{"chameleon_prenorm_gqa", sparse::PolicyKind::kDiagonal, 0.5},
                                           Case{"chameleon_swin_mha", sparse::PolicyKind::kH2O, 0.5},
                                           Case{"layernorm_prenorm_gqa", sparse::PolicyKind::kSlidingWindow, 0.5}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.golden + "_" + std::string(sparse::PolicyName(info.param.kind));
                         });

// Graph replay samples what eager launches sample, with QK-norm, swin-norm
// and the table input in the captured step.
TEST(CudaStackSwitchesGraphTest, GraphReplayMatchesEagerWithEverySwitch) {
  for (const char* name : {"chameleon_swin_mha", "layernorm_prenorm_gqa"}) {
    const nlohmann::json golden = Golden(name);
    const model::ModelSpec spec = model::testing::StackGoldenSpec(golden);
    absl::StatusOr<sparse::ResolvedPolicy> dense = sparse::ResolvePolicy({}, 24);
    sparse::PolicyParams dp;
    dp.kind = sparse::PolicyKind::kDiagonal;
    dp.sparsity = 0.5;
    absl::StatusOr<sparse::ResolvedPolicy> diag = sparse::ResolvePolicy(dp, 24);
    ASSERT_TRUE(dense.ok() && diag.ok());
    std::vector<std::vector<int32_t>> by_mode;
    for (bool graphs : {true, false}) {
      std::unique_ptr<model::Backend> b = Make(spec, golden, true);
      ASSERT_NE(b, nullptr);
      auto* cuda = dynamic_cast<CudaBackend*>(b.get());
      ASSERT_NE(cuda, nullptr);
      cuda->SetGraphs(graphs);
      kv::KvManager kv(*cuda);
      std::vector<model::RowId> rows;
      for (const auto* p : {&*dense, &*dense, &*diag, &*diag}) rows.push_back(*kv.AllocateRow(6, *p));
      std::vector<int32_t> prompt(24);
      for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 13 + 5) % spec.text_vocab());
      const std::vector<int32_t> offsets = {0, 6, 12, 18, 24};
      std::vector<model::SamplingSpec> sampling(2);
      sampling[1].seed = 3;
      sampling[1].top_k = 8;
      std::vector<int32_t> sampled(2), steps(2), all;
      ASSERT_TRUE(cuda->Prefill({rows, offsets, prompt, sampling}, {sampled, nullptr}).ok());
      all.insert(all.end(), sampled.begin(), sampled.end());
      for (int t = 0; t + 1 < 24; ++t) {
        // The sampled logit feeds back as table row sampled_offset + v.
        std::vector<int32_t> next = {sampled[0] + spec.input.sampled_offset, sampled[1] + spec.input.sampled_offset};
        steps = {t, t};
        absl::Status s = cuda->Decode({rows, next, steps, sampling}, {sampled, nullptr});
        ASSERT_TRUE(s.ok()) << s;
        all.insert(all.end(), sampled.begin(), sampled.end());
      }
      by_mode.push_back(all);
    }
    EXPECT_EQ(by_mode[0], by_mode[1]) << name;
  }
}

}  // namespace
}  // namespace argen::cuda
