// kv_cache_dtype fp8 on the CPU backend (the reference the CUDA fp8 rows are
// compared with): rows that round their KV through e4m3 change the logits a
// little, never much, and batch with ordinary rows without affecting them.
#include <cmath>
#include <vector>

#include "engine/cpu/tests/golden_util.h"
#include "engine/kv/kv_manager.h"
#include "engine/sparse/policy_params.h"

namespace argen::cpu {
namespace {

using testing::RelativeError;

TEST(CpuFp8KvTest, Fp8RowsStayCloseToF32RowsAndLeaveTheirBatchmatesAlone) {
  model::BackendOptions options;
  options.max_batch_rows = 8;
  testing::LoadedBackend loaded = testing::LoadTinyBackend("tests/goldens/tiny/tiny-mha", 0.0f, options);
  ASSERT_NE(loaded.backend, nullptr);
  model::Backend& be = *loaded.backend;
  kv::KvManager kv(be);
  const int vocab = be.spec().logits(), l_dec = 24;
  sparse::PolicyParams params;
  params.kind = sparse::PolicyKind::kDiagonal;
  params.sparsity = 0.5;
  absl::StatusOr<sparse::ResolvedPolicy> f32 = sparse::ResolvePolicy(params, l_dec);
  params.kv_format = sparse::KvFormat::kFp8E4m3;
  absl::StatusOr<sparse::ResolvedPolicy> fp8 = sparse::ResolvePolicy(params, l_dec);
  ASSERT_TRUE(f32.ok() && fp8.ok());
  ASSERT_EQ(fp8->kv_format, sparse::KvFormat::kFp8E4m3);

  // Three pairs with one prompt: f32, fp8, and f32 again (alone in a second batch).
  const std::vector<int32_t> prompt = {5, 17, 3, 99, 42, 7, 1};
  const int lp = static_cast<int>(prompt.size());
  auto run = [&](std::vector<const sparse::ResolvedPolicy*> policies, std::vector<std::vector<float>>* logits) {
    std::vector<model::RowId> rows;
    std::vector<int32_t> tokens, offsets = {0};
    for (const auto* p : policies)
      for (int k = 0; k < 2; ++k) {
        absl::StatusOr<model::RowId> r = kv.AllocateRow(lp, *p);
        ASSERT_TRUE(r.ok()) << r.status();
        rows.push_back(*r);
        tokens.insert(tokens.end(), prompt.begin(), prompt.end());
        offsets.push_back(static_cast<int32_t>(tokens.size()));
      }
    const int pairs = static_cast<int>(policies.size());
    std::vector<model::SamplingSpec> sampling(pairs);
    for (auto& s : sampling) s.temperature = 0.f;
    std::vector<int32_t> sampled(pairs);
    std::vector<float> step_logits(2 * pairs * vocab);
    ASSERT_TRUE(be.Prefill({rows, offsets, tokens, sampling}, {sampled, step_logits.data()}).ok());
    logits->push_back(step_logits);
    for (int t = 0; t + 1 < l_dec; ++t) {
      // Teacher-forced: every pair gets the same input token.
      std::vector<int32_t> inputs(pairs, (t * 7) % vocab), steps(pairs, t);
      ASSERT_TRUE(be.Decode({rows, inputs, steps, sampling}, {sampled, step_logits.data()}).ok());
      logits->push_back(step_logits);
    }
    for (model::RowId r : rows) kv.FreeRow(r);
  };
  std::vector<std::vector<float>> mixed, alone;
  ASSERT_NO_FATAL_FAILURE(run({&*f32, &*fp8}, &mixed));
  ASSERT_NO_FATAL_FAILURE(run({&*f32}, &alone));
  double worst = 0, total = 0;
  for (size_t s = 0; s < mixed.size(); ++s) {
    // The f32 pair is unaffected by its fp8 batchmate.
    for (int r = 0; r < 2; ++r)
      EXPECT_LT(RelativeError(&mixed[s][r * vocab], &alone[s][r * vocab], vocab), 1e-5) << "step " << s;
    for (int r = 0; r < 2; ++r) {
      const double e = RelativeError(&mixed[s][(2 + r) * vocab], &mixed[s][r * vocab], vocab);
      worst = std::max(worst, e);
      total += e;
    }
  }
  std::printf("fp8 KV against f32 KV: worst logit error %.3e, mean %.3e\n", worst, total / (2 * mixed.size()));
  EXPECT_GT(total, 0.0) << "fp8 rows must actually round their KV";
  EXPECT_LT(worst, 0.1);
}

}  // namespace
}  // namespace argen::cpu
