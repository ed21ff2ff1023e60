// q/k/v biases (stack.qkv_bias: Qwen2-style, NextStep-1's decoder) in the
// CUDA decoder stack against the CPU backend (the f32 reference): the tiny
// GQA Janus shape with random weights and random, nonzero biases,
// teacher-forced through a chunked prompt and decode steps of 1 and 3 queries
// (prefill and decode passes), dense and diagonal, bf16 and fp8 weights.
// The test prints how far dropping the biases moves the CPU's logits beside
// the device's error, so a bound too loose to see them shows. Needs a GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "engine/families/janus/janus_config.h"
#include "engine/families/janus/janus_spec.h"
#include "engine/kv/kv_manager.h"
#include "engine/model/backend_registry.h"
#include "engine/model/tests/step_plan_harness.h"
#include "engine/model/weight_source.h"
#include "engine/sparse/policy_params.h"

namespace argen::cuda {
namespace {

using model::testing::ForcedRun;
using model::testing::RunForced;

constexpr int32_t kLDec = 36;
// Per logit, relative with floor 1 (model::testing::Difference): bf16 weights
// and KV against f32, as cuda_step_plan_test holds the same shape to.
constexpr double kBf16Tolerance = 0.1;
// weight_dtype fp8 on both: cuda_backend_test's bound and reasoning (codes one
// e4m3 step apart on these 64-wide random models do not average out).
constexpr double kFp8WeightTolerance = 0.3;
// Output points compared for a sparse policy: before any key is skipped.
constexpr size_t kSparseStrictOutputs = 8;

model::ModelSpec BiasedTinySpec() {
  const char* src = std::getenv("ARGEN_SOURCE_DIR");
  const std::string dir = std::string(src ? src : ".") + "/tests/goldens/tiny/tiny-gqa-sharded";
  absl::StatusOr<janus::JanusConfig> config = janus::LoadJanusConfig(dir);
  EXPECT_TRUE(config.ok()) << config.status();
  if (!config.ok()) return {};
  absl::StatusOr<model::ModelSpec> spec = janus::JanusSpec(*config);
  EXPECT_TRUE(spec.ok()) << spec.status();
  if (!spec.ok()) return {};
  spec->stack.qkv_bias = true;
  for (model::LayerRefs& layer : spec->layers) {
    for (model::LinearRef* p : {&layer.q, &layer.k, &layer.v}) {
      p->bias = model::Tensor(p->weight.name + ".bias", {p->weight.shape[0]}, model::TensorFill::kBias);
    }
  }
  return *std::move(spec);
}

std::unique_ptr<model::Backend> Make(const model::ModelSpec& spec, bool cuda, model::WeightFormat format) {
  model::BackendOptions options;
  options.max_batch_rows = 8;
  options.max_prompt_tokens = 64;
  options.kv_budget_bytes = int64_t{64} << 20;
  options.threads = 2;
  options.weight_format = format;
  const std::shared_ptr<const model::WeightSource> weights = model::RandomWeights(7, 0.05f);
  absl::StatusOr<std::unique_ptr<model::Backend>> b =
      cuda ? model::CreateCudaBackend(spec, weights, options) : model::CreateCpuBackend(spec, weights, options);
  EXPECT_TRUE(b.ok()) << b.status();
  return b.ok() ? *std::move(b) : nullptr;
}

TEST(CudaQkvBiasTest, BiasedProjectionsMatchTheCpuBackend) {
  const model::ModelSpec spec = BiasedTinySpec();
  ASSERT_GT(spec.stack.hidden_size, 0);
  model::ModelSpec unbiased = spec;
  unbiased.stack.qkv_bias = false;
  for (model::LayerRefs& layer : unbiased.layers) {
    for (model::LinearRef* p : {&layer.q, &layer.k, &layer.v}) p->bias = {};
  }
  const std::vector<int32_t> tokens = model::testing::ForcedTokens(kLDec - 1, spec.input_rows());
  sparse::PolicyParams diagonal;
  diagonal.kind = sparse::PolicyKind::kDiagonal;
  diagonal.sparsity = 0.5;
  for (model::WeightFormat format : {model::WeightFormat::kAuto, model::WeightFormat::kFp8}) {
    const bool fp8 = format == model::WeightFormat::kFp8;
    std::unique_ptr<model::Backend> gpu = Make(spec, true, format), cpu = Make(spec, false, format);
    std::unique_ptr<model::Backend> cpu_unbiased = Make(unbiased, false, format);
    ASSERT_TRUE(gpu && cpu && cpu_unbiased);
    kv::KvManager gpu_kv(*gpu), cpu_kv(*cpu), unbiased_kv(*cpu_unbiased);
    for (const sparse::PolicyParams& params : {sparse::PolicyParams{}, diagonal}) {
      absl::StatusOr<sparse::ResolvedPolicy> policy = sparse::ResolvePolicy(params, kLDec);
      ASSERT_TRUE(policy.ok()) << policy.status();
      const bool dense = policy->kind == sparse::PolicyKind::kDense;
      const std::string name = std::string(sparse::PolicyName(policy->kind)) + (fp8 ? " fp8 weights" : " bf16");
      ForcedRun reference, without_biases;
      ASSERT_TRUE(RunForced(*cpu, cpu_kv, *policy, tokens, 4, 1, &reference).ok()) << name;
      ASSERT_TRUE(RunForced(*cpu_unbiased, unbiased_kv, *policy, tokens, 4, 1, &without_biases).ok()) << name;
      const double tolerance = fp8 ? kFp8WeightTolerance : kBf16Tolerance;
      const double bias_effect =
          model::testing::Difference(without_biases, reference, dense ? SIZE_MAX : kSparseStrictOutputs).worst;
      EXPECT_NE(without_biases.logits, reference.logits) << name << ": the biases do not reach the reference";
      for (int32_t k : {1, 3}) {
        ForcedRun got;
        ASSERT_TRUE(RunForced(*gpu, gpu_kv, *policy, tokens, 4, k, &got).ok()) << name << " k " << k;
        const model::testing::RunDifference d =
            model::testing::Difference(got, reference, dense ? SIZE_MAX : kSparseStrictOutputs);
        std::cout << name << " k " << k << ": against the CPU " << d.worst << " (biases dropped: " << bias_effect
                  << "), samples differing " << d.differing_samples << "\n";
        EXPECT_LT(d.worst, tolerance) << name << " k " << k;
      }
    }
    EXPECT_EQ(gpu_kv.BytesInUse(), 0);
  }
}

}  // namespace
}  // namespace argen::cuda
