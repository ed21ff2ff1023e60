// kv_budget_bytes / max_batch_rows "auto" on the device (engine/cuda/pool_sizing.h):
// the random-weight Janus-Pro-1B shape sizes its rows and pool from the card,
// every row of the cap is placed at the reference row (50-token prompt,
// diagonal 95%, N_r 64), a full-cap batch prefills and decodes (eager and
// graph steps), and the safety margin is still free afterwards.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <random>
#include <vector>

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/pool_sizing.h"
#include "engine/families/janus/janus_shapes.h"
#include "engine/families/janus/janus_spec.h"
#include "engine/kv/kv_manager.h"
#include "engine/sparse/policy_params.h"

namespace argen::cuda {
namespace {

TEST(CudaAutoSizingTest, RowsAndPoolFillTheCardAndAFullCapBatchRuns) {
  absl::StatusOr<model::ModelSpec> spec = janus::JanusSpec(janus::PublishedJanusConfig("1b").value());
  ASSERT_TRUE(spec.ok()) << spec.status();
  model::BackendOptions o;
  o.max_batch_rows = 0;
  o.kv_budget_bytes = 0;
  o.decode_tokens = 576;
  o.max_prompt_tokens = 64;
  absl::StatusOr<std::unique_ptr<CudaBackend>> made = CreateRandomCudaBackend(*spec, o, 7);
  ASSERT_TRUE(made.ok()) << made.status();
  CudaBackend& be = **made;
  kv::KvManager kv(be);
  std::printf("%s\n", be.MemorySizing().c_str());
  EXPECT_NE(be.MemorySizing().find("(auto)"), std::string::npos);
  const int32_t cap = be.MaxBatchRows();
  EXPECT_EQ(cap % 2, 0);
  EXPECT_GE(cap, 1024);  // a 1B row is ~30 MB at the reference: thousands fit an H200
  EXPECT_LE(cap, kMaxAutoBatchRows);
  size_t free_bytes = 0, total_bytes = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  std::printf("free after creation %.2f GB of %.2f GB\n", free_bytes / 1e9, total_bytes / 1e9);
  EXPECT_GE(static_cast<int64_t>(free_bytes), SafetyMargin(static_cast<int64_t>(total_bytes)) / 2);

  sparse::PolicyParams p;
  p.kind = sparse::PolicyKind::kDiagonal;
  p.sparsity = 0.95;
  p.n_recent = 64;
  const sparse::ResolvedPolicy policy = sparse::ResolvePolicy(p, 576).value();
  constexpr int32_t kPrompt = 50;
  ASSERT_TRUE(kv.CanPlace(std::vector<int64_t>(cap, be.RowBytes(kPrompt, policy))));
  std::vector<model::RowId> rows;
  for (int32_t r = 0; r < cap; ++r) {
    absl::StatusOr<model::RowId> id = kv.AllocateRow(kPrompt, policy);
    ASSERT_TRUE(id.ok()) << "row " << r << " of " << cap << ": " << id.status();
    rows.push_back(*id);
  }
  const int32_t pairs = cap / 2;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int32_t> tok(0, be.spec().text_vocab() - 1);
  std::vector<int32_t> tokens(static_cast<size_t>(cap) * kPrompt), offsets(cap + 1);
  for (int32_t& t : tokens) t = tok(rng);
  for (int32_t r = 0; r <= cap; ++r) offsets[r] = r * kPrompt;
  std::vector<model::SamplingSpec> sampling(pairs);
  for (int32_t i = 0; i < pairs; ++i) {
    sampling[i].seed = 99;
    sampling[i].image_index = i;
  }
  std::vector<int32_t> sampled(pairs, -1), next(pairs), steps(pairs);
  ASSERT_TRUE(be.Prefill({rows, offsets, tokens, sampling}, {sampled, nullptr}).ok());
  for (int32_t t = 0; t < 3; ++t) {  // eager, then captured, then replayed
    next = sampled;
    std::fill(steps.begin(), steps.end(), t);
    absl::Status s = be.Decode({rows, next, steps, sampling}, {sampled, nullptr});
    ASSERT_TRUE(s.ok()) << "step " << t << ": " << s;
  }
  for (int32_t v : sampled) {
    ASSERT_GE(v, 0);
    ASSERT_LT(v, be.spec().logits());
  }
  ASSERT_EQ(cudaMemGetInfo(&free_bytes, &total_bytes), cudaSuccess);
  std::printf("free after a full-cap batch %.2f GB\n", free_bytes / 1e9);
  EXPECT_GE(free_bytes, size_t{256} << 20);
  for (model::RowId r : rows) kv.FreeRow(r);
  EXPECT_EQ(kv.BytesInUse(), 0);
}

}  // namespace
}  // namespace argen::cuda
