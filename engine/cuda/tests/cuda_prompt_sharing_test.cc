// Prompt-KV sharing on the CUDA backend: a request's images reading one copy
// of each prompt's KV give the logits and tokens of a copy per image (the
// decode steps run the same arithmetic over the same bytes; only the prefill
// GEMMs see fewer rows, so bf16 rounding may differ there), and the device
// pool's ledger stays exact under random admission and frees with sharing.
// Prompt rows (sharing across requests): a later request reading a prompt
// row filled by an earlier call gives the logits of its own prompt rows, and
// the ledger stays exact under random admission and frees with them.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/model/backend_registry.h"
#include "engine/model/tests/prompt_sharing_harness.h"
#include "engine/model/weight_source.h"
#include "engine/models/janus/janus_config.h"
#include "engine/models/janus/janus_spec.h"
#include "engine/sparse/policy_params.h"

namespace argen::cuda {
namespace {

using model::testing::GroupRun;
using model::testing::RunGroup;

constexpr int kLDec = 24;
// Shared against copies, per row of logits (||a - b|| / ||b||): the bf16
// tolerance the backend is held to against the CPU, though the two runs
// differ only in the prefill GEMMs' row counts.
constexpr double kTolerance = 3e-2;

std::unique_ptr<model::Backend> TinyCuda(int64_t budget) {
  const char* src = std::getenv("ARGEN_SOURCE_DIR");
  const std::string dir = std::string(src ? src : ".") + "/tests/goldens/tiny/tiny-mha";
  absl::StatusOr<janus::JanusConfig> config = janus::LoadJanusConfig(dir);
  EXPECT_TRUE(config.ok()) << config.status();
  if (!config.ok()) return nullptr;
  absl::StatusOr<model::ModelSpec> spec = janus::JanusSpec(*config);
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::Checkpoint::Open(dir);
  EXPECT_TRUE(spec.ok() && ckpt.ok());
  if (!spec.ok() || !ckpt.ok()) return nullptr;
  model::BackendOptions options;
  options.max_batch_rows = 8;
  options.max_prompt_tokens = 64;
  options.kv_budget_bytes = budget;
  auto backend = model::CreateCudaBackend(*spec, model::CheckpointWeights(std::move(*ckpt)), options);
  EXPECT_TRUE(backend.ok()) << backend.status();
  return backend.ok() ? std::move(*backend) : nullptr;
}

sparse::ResolvedPolicy Policy(sparse::PolicyKind kind, double sparsity, sparse::KvFormat format) {
  return model::testing::SharingPolicy(kind, sparsity, format, kLDec);
}

const std::vector<int32_t>& kCond = model::testing::kSharingCond;
const std::vector<int32_t>& kUncond = model::testing::kSharingUncond;

TEST(CudaPromptSharingTest, SharedPromptGivesTheLogitsOfACopyPerImage) {
  std::unique_ptr<model::Backend> be = TinyCuda(64 << 20);
  ASSERT_NE(be, nullptr);
  ASSERT_TRUE(be->SupportsPromptSharing());
  const int vocab = be->spec().logits();
  const struct {
    const char* name;
    sparse::ResolvedPolicy policy;
  } cases[] = {{"dense", Policy(sparse::PolicyKind::kDense, 0, sparse::KvFormat::kAuto)},
               {"diagonal", Policy(sparse::PolicyKind::kDiagonal, 0.5, sparse::KvFormat::kAuto)},
               {"h2o", Policy(sparse::PolicyKind::kH2O, 0.5, sparse::KvFormat::kAuto)},
               {"dense fp8", Policy(sparse::PolicyKind::kDense, 0, sparse::KvFormat::kFp8E4m3)},
               {"diagonal fp8", Policy(sparse::PolicyKind::kDiagonal, 0.5, sparse::KvFormat::kFp8E4m3)}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    GroupRun copies, shared;
    // Teacher-forced, so that one token drawn differently cannot change the inputs.
    ASSERT_NO_FATAL_FAILURE(RunGroup(*be, c.policy, kCond, kUncond, {3, false, kLDec - 1, false, false}, &copies));
    ASSERT_NO_FATAL_FAILURE(RunGroup(*be, c.policy, kCond, kUncond, {3, true, kLDec - 1, true, false}, &shared));
    double worst = 0;
    int bitwise_steps = 0, agree = 0, total = 0;
    for (size_t s = 0; s < copies.logits.size(); ++s) {
      if (copies.logits[s] == shared.logits[s]) ++bitwise_steps;
      for (int r = 0; r < 6; ++r)
        worst = std::max(worst, model::testing::LogitsRowError(shared.logits[s], copies.logits[s], r, vocab));
      for (int i = 0; i < 3; ++i, ++total) agree += shared.sampled[s][i] == copies.sampled[s][i];
    }
    std::printf("[ prompt sharing ] %s: worst row error %.3g, %d of %zu steps bitwise equal, tokens %d of %d equal\n",
                c.name, worst, bitwise_steps, copies.logits.size(), agree, total);
    EXPECT_LT(worst, kTolerance);
    EXPECT_GE(agree, 0.85 * total);
    const int lc = static_cast<int>(kCond.size()), lu = static_cast<int>(kUncond.size());
    EXPECT_EQ(shared.kv_bytes, be->RowBytes(lc, c.policy) + be->RowBytes(lu, c.policy) +
                                   2 * (be->SharingRowBytes(lc, c.policy) + be->SharingRowBytes(lu, c.policy)));
    EXPECT_LT(shared.kv_bytes, copies.kv_bytes);
  }
}

TEST(CudaPromptSharingTest, LedgerStaysExactUnderRandomAdmissionAndFrees) {
  const sparse::ResolvedPolicy dense = Policy(sparse::PolicyKind::kDense, 0, sparse::KvFormat::kAuto);
  const sparse::ResolvedPolicy diagonal = Policy(sparse::PolicyKind::kDiagonal, 0.75, sparse::KvFormat::kAuto);
  const sparse::ResolvedPolicy fp8 = Policy(sparse::PolicyKind::kDiagonal, 0.75, sparse::KvFormat::kFp8E4m3);
  int64_t row_bytes = 0;
  {
    std::unique_ptr<model::Backend> probe = TinyCuda(64 << 20);
    ASSERT_NE(probe, nullptr);
    row_bytes = probe->RowBytes(8, dense);
  }
  std::unique_ptr<model::Backend> be = TinyCuda(12 * 2 * row_bytes);  // about a dozen dense images
  ASSERT_NE(be, nullptr);
  ASSERT_NO_FATAL_FAILURE(model::testing::RandomLedgerWalk(*be, {&dense, &diagonal, &fp8}, 400, 11));
}

TEST(CudaPromptSharingTest, PromptRowsServeLaterRequestsWithTheLogitsOfOwnRows) {
  std::unique_ptr<model::Backend> be = TinyCuda(64 << 20);
  ASSERT_NE(be, nullptr);
  ASSERT_TRUE(be->SupportsPromptRows());
  const int vocab = be->spec().logits();
  const struct {
    const char* name;
    sparse::ResolvedPolicy policy;
  } cases[] = {{"dense", Policy(sparse::PolicyKind::kDense, 0, sparse::KvFormat::kAuto)},
               {"diagonal", Policy(sparse::PolicyKind::kDiagonal, 0.5, sparse::KvFormat::kAuto)},
               {"h2o", Policy(sparse::PolicyKind::kH2O, 0.5, sparse::KvFormat::kAuto)},
               {"diagonal fp8", Policy(sparse::PolicyKind::kDiagonal, 0.5, sparse::KvFormat::kFp8E4m3)}};
  const int lc = static_cast<int>(kCond.size()), lu = static_cast<int>(kUncond.size());
  const int lb = static_cast<int>(model::testing::kSharingCond2.size());
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    model::testing::AcrossRun own, shared;
    ASSERT_NO_FATAL_FAILURE(model::testing::RunAcrossRequests(*be, c.policy, false, 8, &own, false));
    ASSERT_NO_FATAL_FAILURE(model::testing::RunAcrossRequests(*be, c.policy, true, 8, &shared, false));
    ASSERT_EQ(own.logits.size(), shared.logits.size());
    double worst = 0;
    int bitwise = 0, agree = 0, total = 0;
    for (size_t s = 0; s < own.logits.size(); ++s) {
      if (own.logits[s] == shared.logits[s]) ++bitwise;
      const int rows = static_cast<int>(own.logits[s].size()) / vocab;
      for (int r = 0; r < rows; ++r)
        worst = std::max(worst, model::testing::LogitsRowError(shared.logits[s], own.logits[s], r, vocab));
      for (size_t i = 0; i < own.sampled[s].size(); ++i, ++total) agree += own.sampled[s][i] == shared.sampled[s][i];
    }
    std::printf("[ prompt rows ] %s: worst row error %.3g, %d of %zu calls bitwise equal, tokens %d of %d equal\n",
                c.name, worst, bitwise, own.logits.size(), agree, total);
    EXPECT_LT(worst, kTolerance);
    EXPECT_GE(agree, 0.85 * total);
    const sparse::KvFormat f = c.policy.kv_format;
    const int64_t sa = be->SharingRowBytes(lc, c.policy), su = be->SharingRowBytes(lu, c.policy);
    const int64_t sb = be->SharingRowBytes(lb, c.policy);
    const int64_t a = be->PromptRowBytes(lc, f) + be->PromptRowBytes(lu, f) + 2 * (sa + su);
    ASSERT_EQ(shared.kv_bytes.size(), 4u);
    EXPECT_EQ(shared.kv_bytes[0], a);
    EXPECT_EQ(shared.kv_bytes[1], a + be->PromptRowBytes(lb, f) + sb + su);
    EXPECT_EQ(shared.kv_bytes[2], be->PromptRowBytes(lb, f) + be->PromptRowBytes(lu, f) + sb + su);
    EXPECT_EQ(shared.kv_bytes[3], 0);
  }
}

TEST(CudaPromptSharingTest, PromptRowLedgerStaysExactUnderRandomAdmissionAndFrees) {
  const sparse::ResolvedPolicy dense = Policy(sparse::PolicyKind::kDense, 0, sparse::KvFormat::kAuto);
  const sparse::ResolvedPolicy diagonal = Policy(sparse::PolicyKind::kDiagonal, 0.75, sparse::KvFormat::kAuto);
  const sparse::ResolvedPolicy fp8 = Policy(sparse::PolicyKind::kDiagonal, 0.75, sparse::KvFormat::kFp8E4m3);
  int64_t row_bytes = 0;
  {
    std::unique_ptr<model::Backend> probe = TinyCuda(64 << 20);
    ASSERT_NE(probe, nullptr);
    row_bytes = probe->RowBytes(8, dense);
  }
  std::unique_ptr<model::Backend> be = TinyCuda(12 * 2 * row_bytes);
  ASSERT_NE(be, nullptr);
  ASSERT_NO_FATAL_FAILURE(model::testing::RandomPromptRowWalk(*be, {&dense, &diagonal, &fp8}, 400, 13));
}

}  // namespace
}  // namespace argen::cuda
