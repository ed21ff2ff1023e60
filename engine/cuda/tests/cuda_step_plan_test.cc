// The step plan on the CUDA backend (engine/model/step_plan.h): a pair's
// image tokens fed k at a time in one step give bitwise the logits and
// samples of one token per step (the device runs each query rank as its own
// decode call over the same rows), for dense, every sparse policy and fp8 KV;
// they agree with the CPU reference within the bf16 tolerance; chunked
// prefill is refused as not implemented on this device.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/families/janus/janus_config.h"
#include "engine/families/janus/janus_spec.h"
#include "engine/kv/kv_manager.h"
#include "engine/model/backend_registry.h"
#include "engine/model/tests/step_plan_harness.h"
#include "engine/model/weight_source.h"

namespace argen::cuda {
namespace {

using model::testing::ForcedRun;
using model::testing::RunForced;

constexpr int32_t kLDec = 36;
// bf16 weights and KV against the f32 reference, per logit (relative, floor 1).
constexpr double kCpuTolerance = 0.1;
// Output points of a sparse policy compared with the CPU: token 0 and the
// first decode steps, before any key is skipped (N_att at 50% of 36 is 18).
constexpr size_t kSparseStrictOutputs = 8;

std::unique_ptr<model::Backend> Tiny(bool cuda, model::ModelSpec* spec_out) {
  const char* src = std::getenv("ARGEN_SOURCE_DIR");
  const std::string dir = std::string(src ? src : ".") + "/tests/goldens/tiny/tiny-gqa-sharded";
  absl::StatusOr<janus::JanusConfig> config = janus::LoadJanusConfig(dir);
  EXPECT_TRUE(config.ok()) << config.status();
  if (!config.ok()) return nullptr;
  absl::StatusOr<model::ModelSpec> spec = janus::JanusSpec(*config);
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::Checkpoint::Open(dir);
  EXPECT_TRUE(spec.ok() && ckpt.ok());
  if (!spec.ok() || !ckpt.ok()) return nullptr;
  *spec_out = *spec;
  model::BackendOptions options;
  options.max_batch_rows = 8;
  options.max_prompt_tokens = 64;
  options.kv_budget_bytes = int64_t{64} << 20;
  auto backend = cuda ? model::CreateCudaBackend(*spec, model::CheckpointWeights(std::move(*ckpt)), options)
                      : model::CreateCpuBackend(*spec, model::CheckpointWeights(std::move(*ckpt)), options);
  EXPECT_TRUE(backend.ok()) << backend.status();
  return backend.ok() ? std::move(*backend) : nullptr;
}

TEST(CudaStepPlanTest, TeacherForcedStepsMatchOneTokenSteps) {
  model::ModelSpec spec;
  std::unique_ptr<model::Backend> gpu = Tiny(true, &spec);
  std::unique_ptr<model::Backend> cpu = Tiny(false, &spec);
  ASSERT_NE(gpu, nullptr);
  ASSERT_NE(cpu, nullptr);
  kv::KvManager gpu_kv(*gpu), cpu_kv(*cpu);
  const std::vector<int32_t> tokens = model::testing::ForcedTokens(kLDec - 1, spec.input_rows());
  int cases = 0;
  for (const model::testing::PolicyCase& c :
       model::testing::EveryPolicyCase(kLDec, spec.stack.num_layers, spec.stack.num_kv_heads)) {
    ForcedRun want, reference;
    ASSERT_TRUE(RunForced(*gpu, gpu_kv, c.policy, tokens, 0, 1, &want).ok()) << c.name;
    ASSERT_TRUE(RunForced(*cpu, cpu_kv, c.policy, tokens, 0, 1, &reference).ok()) << c.name;
    // Against the CPU: every step for dense; a sparse policy's choices may
    // flip on a bf16 near-tie and then its steps diverge (as
    // cuda_backend_test bounds them), so its first steps only.
    const bool dense = c.policy.kind == sparse::PolicyKind::kDense;
    const model::testing::RunDifference against_cpu =
        model::testing::Difference(want, reference, dense ? SIZE_MAX : kSparseStrictOutputs);
    EXPECT_LT(against_cpu.worst, kCpuTolerance) << c.name;
    std::cout << c.name << ": against the CPU " << against_cpu.worst << ", samples differing "
              << against_cpu.differing_samples << " of " << want.sampled.size() << "\n";
    for (int32_t k : {2, 5, 35}) {
      ForcedRun got;
      ASSERT_TRUE(RunForced(*gpu, gpu_kv, c.policy, tokens, 0, k, &got).ok()) << c.name << " k " << k;
      const model::testing::RunDifference d = model::testing::Difference(got, want);
      EXPECT_TRUE(d.bitwise) << c.name << " k " << k << ": worst " << d.worst;
      EXPECT_EQ(d.differing_samples, 0) << c.name << " k " << k;
      ++cases;
    }
  }
  EXPECT_EQ(cases, 13 * 3);
  EXPECT_EQ(gpu_kv.BytesInUse(), 0);
}

TEST(CudaStepPlanTest, ChunkedPrefillIsNotImplementedHere) {
  model::ModelSpec spec;
  std::unique_ptr<model::Backend> gpu = Tiny(true, &spec);
  ASSERT_NE(gpu, nullptr);
  kv::KvManager gpu_kv(*gpu);
  const auto cases = model::testing::EveryPolicyCase(kLDec, spec.stack.num_layers, spec.stack.num_kv_heads);
  ForcedRun run;
  std::vector<model::RowId> rows;
  const absl::Status s = RunForced(*gpu, gpu_kv, cases[0].policy, {}, 3, 1, &run, &rows);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
  EXPECT_NE(s.message().find("chunked prefill"), std::string::npos) << s;
}

}  // namespace
}  // namespace argen::cuda
