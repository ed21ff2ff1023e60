// The step plan on the CUDA backend (engine/model/step_plan.h), teacher
// forced against one token per step and a whole prompt:
//   * a row's k tokens run in one pass (other GEMM shapes, so within the
//     bf16 tolerance of one per step, not bitwise; a dense row's attend as
//     query groups, kernels/query_groups.h); a sparse row's queries
//     are planned, attended and applied rank by rank inside each layer, so
//     up to its first possible selection it matches one per step and the CPU
//     (a selection may flip on a near-tie later, as against the CPU), and
//     every logit stays finite;
//   * a prompt fed in chunks writes the KV a whole prompt does (within the
//     tolerance: the prefill GEMMs see other row counts);
//   * every run agrees with the CPU reference within the bf16 tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/cuda/tests/tiny_backend.h"
#include "engine/kv/kv_manager.h"
#include "engine/model/tests/step_plan_harness.h"
#include "engine/sparse/policy_params.h"
#include "kernels/sparse/policy.h"

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
  return testing::TinyBackend({.cuda = cuda}, spec_out);
}

// Logits of two device runs whose GEMMs see other shapes (relative, floor 1).
constexpr double kShapeTolerance = 3e-2;

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
      const size_t compared = dense ? SIZE_MAX : kSparseStrictOutputs;
      const model::testing::RunDifference d = model::testing::Difference(got, want, compared);
      EXPECT_LT(d.worst, kShapeTolerance) << c.name << " k " << k;
      EXPECT_LT(model::testing::Difference(got, reference, compared).worst, kCpuTolerance) << c.name << " k " << k;
      EXPECT_TRUE(std::isfinite(model::testing::Difference(got, want).worst)) << c.name << " k " << k;
      ++cases;
    }
  }
  EXPECT_EQ(cases, 14 * 3);  // 12 kinds + 2 fp8 cases
  EXPECT_EQ(gpu_kv.BytesInUse(), 0);
}

TEST(CudaStepPlanTest, ChunkedPrefillMatchesWholePrompts) {
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
    const bool dense = c.policy.kind == sparse::PolicyKind::kDense;
    // A sparse policy's choices may flip on a bf16 near-tie once the prompt
    // KV differs in its last bits, so its first outputs only.
    const size_t compared = dense ? SIZE_MAX : kSparseStrictOutputs;
    ForcedRun whole, reference;
    ASSERT_TRUE(RunForced(*gpu, gpu_kv, c.policy, tokens, 0, 1, &whole).ok()) << c.name;
    ASSERT_TRUE(RunForced(*cpu, cpu_kv, c.policy, tokens, 0, 1, &reference).ok()) << c.name;
    for (int32_t chunk : {1, 3, 5}) {
      ForcedRun got;
      ASSERT_TRUE(RunForced(*gpu, gpu_kv, c.policy, tokens, chunk, 1, &got).ok()) << c.name << " chunk " << chunk;
      const model::testing::RunDifference d = model::testing::Difference(got, whole, compared);
      EXPECT_LT(d.worst, kShapeTolerance) << c.name << " chunk " << chunk;
      EXPECT_LT(model::testing::Difference(got, reference, compared).worst, kCpuTolerance)
          << c.name << " chunk " << chunk;
      ++cases;
    }
    // Chunks and several tokens a step together.
    ForcedRun both;
    ASSERT_TRUE(RunForced(*gpu, gpu_kv, c.policy, tokens, 4, 3, &both).ok()) << c.name;
    EXPECT_LT(model::testing::Difference(both, reference, compared).worst, kCpuTolerance) << c.name;
  }
  EXPECT_EQ(cases, 14 * 3);  // 12 kinds + 2 fp8 cases
  EXPECT_EQ(gpu_kv.BytesInUse(), 0);
}

// Prompts given as embeddings (step_plan.h kEmbedding; LlamaGen t2i's
// caption features) run as their token ids do when the embeddings are the
// text_embed rows of those ids: the same upload, so bitwise, whole or chunked.
TEST(CudaStepPlanTest, PromptEmbeddingsMatchTheirTokenIds) {
  model::ModelSpec spec;
  std::unique_ptr<model::Backend> gpu = Tiny(true, &spec);
  ASSERT_NE(gpu, nullptr);
  const char* src = std::getenv("ARGEN_SOURCE_DIR");
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::Checkpoint::Open(
      std::string(src ? src : ".") + "/tests/goldens/tiny/" + testing::TinyOptions{}.checkpoint);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  const model::testing::ForcedEmbeddings embeddings =
      model::testing::ForcedPromptEmbeddings(*model::CheckpointWeights(std::move(*ckpt)), spec);
  kv::KvManager gpu_kv(*gpu);
  const std::vector<int32_t> tokens = model::testing::ForcedTokens(kLDec - 1, spec.input_rows());
  absl::StatusOr<sparse::ResolvedPolicy> dense = sparse::ResolvePolicy({}, sparse::SquareGrid(kLDec), nullptr);
  ASSERT_TRUE(dense.ok()) << dense.status();
  for (int32_t chunk : {0, 3}) {
    ForcedRun ids, vectors;
    ASSERT_TRUE(RunForced(*gpu, gpu_kv, *dense, tokens, chunk, 1, &ids).ok());
    ASSERT_TRUE(RunForced(*gpu, gpu_kv, *dense, tokens, chunk, 1, &vectors, nullptr, &embeddings).ok());
    const model::testing::RunDifference d = model::testing::Difference(vectors, ids);
    EXPECT_TRUE(d.bitwise) << "chunk " << chunk << ": worst " << d.worst;
    EXPECT_EQ(d.differing_samples, 0);
  }
  EXPECT_EQ(gpu_kv.BytesInUse(), 0);
}

// More decode queries than one pass holds (max_batch_rows / 2 pairs) are
// split into passes in order.
TEST(CudaStepPlanTest, QueriesBeyondOnePassAreSplitInOrder) {
  model::ModelSpec spec;
  std::unique_ptr<model::Backend> gpu = testing::TinyBackend({.max_batch_rows = 4}, &spec);
  std::unique_ptr<model::Backend> cpu = Tiny(false, &spec);
  ASSERT_NE(gpu, nullptr);
  ASSERT_NE(cpu, nullptr);
  kv::KvManager gpu_kv(*gpu), cpu_kv(*cpu);
  const std::vector<int32_t> tokens = model::testing::ForcedTokens(kLDec - 1, spec.input_rows());
  const sparse::ResolvedPolicy dense =
      model::testing::EveryPolicyCase(kLDec, spec.stack.num_layers, spec.stack.num_kv_heads)[0].policy;
  ASSERT_EQ(dense.kind, sparse::PolicyKind::kDense);
  ForcedRun got, reference;
  ASSERT_TRUE(RunForced(*gpu, gpu_kv, dense, tokens, 0, 7, &got).ok());
  ASSERT_TRUE(RunForced(*cpu, cpu_kv, dense, tokens, 0, 1, &reference).ok());
  EXPECT_LT(model::testing::Difference(got, reference).worst, kCpuTolerance);
  EXPECT_EQ(gpu_kv.BytesInUse(), 0);
}

// Parallel decoding's plans (step_plan.h: out of order, provisional
// queries): image rows of a 6 x 6 grid in flight, each starting once the row
// above has 2 tokens, with a provisional query standing in for the row
// above's last token; the device's slot lists must attend exactly what the
// CPU reference attends (the written indices below t, and t); and the same
// for the sparse policies that plan out of order (planned on the device).
TEST(CudaStepPlanTest, OutOfOrderQueriesMatchTheCpu) {
  model::ModelSpec spec;
  std::unique_ptr<model::Backend> gpu = Tiny(true, &spec);
  std::unique_ptr<model::Backend> cpu = Tiny(false, &spec);
  ASSERT_NE(gpu, nullptr);
  ASSERT_NE(cpu, nullptr);
  kv::KvManager gpu_kv(*gpu), cpu_kv(*cpu);
  constexpr int32_t kWidth = 6, kWindow = 2;
  const std::vector<int32_t> tokens = model::testing::ForcedTokens(kLDec, spec.input_rows());
  const sparse::ResolvedPolicy dense =
      model::testing::EveryPolicyCase(kLDec, spec.stack.num_layers, spec.stack.num_kv_heads)[0].policy;
  ASSERT_EQ(dense.kind, sparse::PolicyKind::kDense);
  // The schedule: per step, (index, provisional) in increasing index order.
  std::vector<std::vector<std::pair<int32_t, bool>>> steps;
  {
    std::vector<int32_t> made(kLDec / kWidth, 0);
    std::vector<uint8_t> started(made.size(), 0);
    started[0] = 1;
    for (bool more = true; more;) {
      std::vector<std::pair<int32_t, bool>> step;
      for (size_t r = 0; r < made.size(); ++r) {
        if (!started[r] && made[r - 1] >= kWindow) {
          started[r] = 1;
          step.push_back({static_cast<int32_t>(r) * kWidth - 1, true});  // the row above's last, not made yet
        }
        if (started[r] && made[r] < kWidth && static_cast<int32_t>(r) * kWidth + made[r] < kLDec - 1) {
          step.push_back({static_cast<int32_t>(r) * kWidth + made[r]++, false});
        }
      }
      std::sort(step.begin(), step.end());
      more = !step.empty();
      if (more) steps.push_back(std::move(step));
    }
  }
  ASSERT_LT(steps.size(), static_cast<size_t>(kLDec - 1));  // fewer passes than one token each
  const auto run = [&](model::Backend& be, kv::KvManager& kv, const sparse::ResolvedPolicy& policy,
                       std::vector<std::vector<float>>* logits) {
    std::vector<model::RowId> rows;
    const std::vector<int32_t>* prompts[2] = {&model::testing::kForcedCond, &model::testing::kForcedUncond};
    for (const std::vector<int32_t>* p : prompts) {
      absl::StatusOr<model::RowId> r = kv.AllocateRow(static_cast<int32_t>(p->size()), policy);
      ASSERT_TRUE(r.ok()) << r.status();
      rows.push_back(*r);
    }
    model::SamplingSpec sampling;
    sampling.seed = 99;
    sampling.temperature = 1.0f;
    sampling.cfg_weight = 3.0f;
    const int32_t vocab = be.spec().logits();
    model::StepPlanBuilder b;
    for (int i = 0; i < 2; ++i) {
      b.AddRow(rows[i]);
      b.AddPromptQueries(*prompts[i], 0, static_cast<int32_t>(prompts[i]->size()));
    }
    b.AddSampling(sampling);
    std::vector<int32_t> sampled(1);
    std::vector<float> out(2 * vocab);
    ASSERT_TRUE(be.Forward(b.Plan(), {sampled, out.data()}).ok());
    for (const auto& step : steps) {
      b.Clear();
      b.AllowOutOfOrder();
      for (int i = 0; i < 2; ++i) {
        b.AddRow(rows[i]);
        for (auto [index, provisional] : step) {
          b.AddQuery(model::QueryKind::kDecode, provisional ? tokens[index - 1] : tokens[index], index, provisional);
        }
      }
      b.AddSampling(sampling);
      sampled.assign(step.size(), -1);
      out.assign(step.size() * 2 * vocab, 0.f);
      const absl::Status s = be.Forward(b.Plan(), {sampled, out.data()});
      ASSERT_TRUE(s.ok()) << s;
      for (size_t o = 0; o < step.size(); ++o) {
        logits->emplace_back(out.begin() + o * 2 * vocab, out.begin() + (o + 1) * 2 * vocab);
      }
    }
    for (model::RowId r : rows) kv.FreeRow(r);
  };
  // The output points of the schedule's queries in order, with their decode index.
  std::vector<int32_t> output_index = {-1};  // token 0: the prefill
  for (const auto& step : steps) {
    for (auto [index, provisional] : step) output_index.push_back(index);
  }
  // Worst relative logit difference over the output points whose query index is below `below`.
  const auto worst_below = [&](const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& want,
                               int32_t below) {
    double worst = 0;
    for (size_t o = 0; o < want.size() && o < output_index.size(); ++o) {
      if (output_index[o] >= below) continue;
      for (size_t v = 0; v < want[o].size(); ++v) {
        const double a = got[o][v], w = want[o][v];
        worst = std::max(worst, std::isfinite(a) ? std::abs(a - w) / std::max(1.0, std::abs(w)) : INFINITY);
      }
    }
    return worst;
  };
  std::vector<std::vector<float>> got, want;
  run(*gpu, gpu_kv, dense, &got);
  run(*cpu, cpu_kv, dense, &want);
  ASSERT_EQ(got.size(), want.size());
  const double worst = worst_below(got, want, kLDec);
  std::cout << "out of order: " << steps.size() << " steps, " << want.size() << " queries, worst " << worst << "\n";
  EXPECT_LT(worst, kCpuTolerance);
  EXPECT_EQ(gpu_kv.BytesInUse(), 0);

  // The sparse policies that plan out of order (sparse::PlanQuery: the device
  // plans each query, the CPU the same definition): positional ones (no
  // choice to flip on a bf16 near-tie) at every output point; diagonal with
  // selections until its first selection can happen (t = N_att - 1: a
  // near-tie may pick another key from there), every point finite.
  struct SparseCase {
    sparse::PolicyKind kind;
    double sparsity;
    int32_t n_recent;
  };
  for (const SparseCase& c :
       {SparseCase{sparse::PolicyKind::kStreamingLlm, 0.75, 0},
        SparseCase{sparse::PolicyKind::kDiagonal, 0.5, 0},  // N_r = N_att: a ring of 18
        SparseCase{sparse::PolicyKind::kDiagonal, 0.75, 24}, SparseCase{sparse::PolicyKind::kDiagonalSink4, 0.5, 30}}) {
    sparse::PolicyParams params;
    params.kind = c.kind;
    params.sparsity = c.sparsity;
    params.n_recent = c.n_recent;
    absl::StatusOr<sparse::ResolvedPolicy> policy =
        sparse::ResolvePolicy(params, sparse::GridGeometry{kWidth, 0, kLDec});
    ASSERT_TRUE(policy.ok()) << policy.status();
    const sparse::PolicyLayout layout = sparse::LayoutFor(*policy);
    const int32_t exact_below = layout.skip_capacity == 0 ? kLDec : policy->n_att - 1;
    got.clear();
    want.clear();
    run(*gpu, gpu_kv, *policy, &got);
    run(*cpu, cpu_kv, *policy, &want);
    ASSERT_EQ(got.size(), want.size());
    const double sparse_worst = worst_below(got, want, exact_below);
    std::cout << sparse::PolicyName(c.kind) << " out of order: worst " << sparse_worst << " below t " << exact_below
              << "\n";
    EXPECT_LT(sparse_worst, kCpuTolerance) << sparse::PolicyName(c.kind);
    for (const std::vector<float>& l : got) {
      for (float v : l) ASSERT_TRUE(std::isfinite(v)) << sparse::PolicyName(c.kind);
    }
    EXPECT_EQ(gpu_kv.BytesInUse(), 0);
  }
}

}  // namespace
}  // namespace argen::cuda
