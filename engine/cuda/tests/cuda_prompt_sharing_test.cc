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

#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/tests/tiny_backend.h"
#include "engine/model/backend_registry.h"
#include "engine/model/tests/prompt_sharing_harness.h"
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
  return testing::TinyBackend({.checkpoint = "tiny-mha", .kv_budget_bytes = budget});
}

sparse::ResolvedPolicy Policy(sparse::PolicyKind kind, double sparsity, sparse::KvFormat format) {
  return model::testing::SharingPolicy(kind, sparsity, format, kLDec);
}

// How closely two runs agree, per call: the worst logits row error, the calls
// whose logits are bitwise equal, and the sampled tokens that are the same.
struct Agreement {
  double worst = 0;
  int bitwise = 0, agree = 0, total = 0;
};
Agreement Compare(const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& want,
                  const std::vector<std::vector<int32_t>>& got_sampled,
                  const std::vector<std::vector<int32_t>>& want_sampled, int vocab) {
  Agreement a;
  for (size_t s = 0; s < want.size() && s < got.size(); ++s) {
    if (got[s] == want[s]) ++a.bitwise;
    const int rows = static_cast<int>(want[s].size()) / vocab;
    for (int r = 0; r < rows; ++r)
      a.worst = std::max(a.worst, model::testing::LogitsRowError(got[s], want[s], r, vocab));
    for (size_t i = 0; i < want_sampled[s].size(); ++i, ++a.total) a.agree += got_sampled[s][i] == want_sampled[s][i];
  }
  return a;
}

const std::vector<int32_t>& kCond = model::testing::kSharingCond;
const std::vector<int32_t>& kUncond = model::testing::kSharingUncond;

TEST(CudaPromptSharingTest, SharedPromptGivesTheLogitsOfACopyPerImage) {
  std::unique_ptr<model::Backend> be = TinyCuda(64 << 20);
  ASSERT_NE(be, nullptr);
  const int vocab = be->spec().logits();
  std::vector<model::testing::NamedPolicy> cases = model::testing::SharingCases(kLDec);
  cases.push_back({"dense fp8", Policy(sparse::PolicyKind::kDense, 0, sparse::KvFormat::kFp8E4m3)});
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    GroupRun copies, shared;
    // Teacher-forced, so that one token drawn differently cannot change the inputs.
    ASSERT_NO_FATAL_FAILURE(RunGroup(*be, c.policy, kCond, kUncond, {3, false, kLDec - 1, false, false}, &copies));
    ASSERT_NO_FATAL_FAILURE(RunGroup(*be, c.policy, kCond, kUncond, {3, true, kLDec - 1, true, false}, &shared));
    const Agreement a = Compare(shared.logits, copies.logits, shared.sampled, copies.sampled, vocab);
    std::printf("[ prompt sharing ] %s: worst row error %.3g, %d of %zu steps bitwise equal, tokens %d of %d equal\n",
                c.name, a.worst, a.bitwise, copies.logits.size(), a.agree, a.total);
    EXPECT_LT(a.worst, kTolerance);
    EXPECT_GE(a.agree, 0.85 * a.total);
    const int lc = static_cast<int>(kCond.size()), lu = static_cast<int>(kUncond.size());
    EXPECT_EQ(shared.kv_bytes, be->RowBytes(lc, c.policy) + be->RowBytes(lu, c.policy) +
                                   2 * (be->SharingRowBytes(lc, c.policy) + be->SharingRowBytes(lu, c.policy)));
    EXPECT_LT(shared.kv_bytes, copies.kv_bytes);
  }
}

// A backend whose pool has room for about a dozen dense images.
std::unique_ptr<model::Backend> WalkBackend(const sparse::ResolvedPolicy& dense) {
  int64_t row_bytes = 0;
  {
    std::unique_ptr<model::Backend> probe = TinyCuda(64 << 20);
    if (probe == nullptr) return nullptr;
    row_bytes = probe->RowBytes(8, dense);
  }
  return TinyCuda(12 * 2 * row_bytes);
}

TEST(CudaPromptSharingTest, LedgerStaysExactUnderRandomAdmissionAndFrees) {
  const sparse::ResolvedPolicy dense = Policy(sparse::PolicyKind::kDense, 0, sparse::KvFormat::kAuto);
  const sparse::ResolvedPolicy diagonal = Policy(sparse::PolicyKind::kDiagonal, 0.75, sparse::KvFormat::kAuto);
  const sparse::ResolvedPolicy fp8 = Policy(sparse::PolicyKind::kDiagonal, 0.75, sparse::KvFormat::kFp8E4m3);
  std::unique_ptr<model::Backend> be = WalkBackend(dense);
  ASSERT_NE(be, nullptr);
  ASSERT_NO_FATAL_FAILURE(model::testing::RandomLedgerWalk(*be, {&dense, &diagonal, &fp8}, 400, 11));
}

TEST(CudaPromptSharingTest, PromptRowsServeLaterRequestsWithTheLogitsOfOwnRows) {
  std::unique_ptr<model::Backend> be = TinyCuda(64 << 20);
  ASSERT_NE(be, nullptr);
  const int vocab = be->spec().logits();
  const std::vector<model::testing::NamedPolicy> cases = model::testing::SharingCases(kLDec);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    model::testing::AcrossRun own, shared;
    ASSERT_NO_FATAL_FAILURE(model::testing::RunAcrossRequests(*be, c.policy, false, 8, &own, false));
    ASSERT_NO_FATAL_FAILURE(model::testing::RunAcrossRequests(*be, c.policy, true, 8, &shared, false));
    ASSERT_EQ(own.logits.size(), shared.logits.size());
    const Agreement m = Compare(shared.logits, own.logits, shared.sampled, own.sampled, vocab);
    std::printf("[ prompt rows ] %s: worst row error %.3g, %d of %zu calls bitwise equal, tokens %d of %d equal\n",
                c.name, m.worst, m.bitwise, own.logits.size(), m.agree, m.total);
    EXPECT_LT(m.worst, kTolerance);
    EXPECT_GE(m.agree, 0.85 * m.total);
    model::testing::ExpectAcrossLedger(*be, c.policy, shared);
  }
}

TEST(CudaPromptSharingTest, PromptRowLedgerStaysExactUnderRandomAdmissionAndFrees) {
  const sparse::ResolvedPolicy dense = Policy(sparse::PolicyKind::kDense, 0, sparse::KvFormat::kAuto);
  const sparse::ResolvedPolicy diagonal = Policy(sparse::PolicyKind::kDiagonal, 0.75, sparse::KvFormat::kAuto);
  const sparse::ResolvedPolicy fp8 = Policy(sparse::PolicyKind::kDiagonal, 0.75, sparse::KvFormat::kFp8E4m3);
  std::unique_ptr<model::Backend> be = WalkBackend(dense);
  ASSERT_NE(be, nullptr);
  ASSERT_NO_FATAL_FAILURE(model::testing::RandomPromptRowWalk(*be, {&dense, &diagonal, &fp8}, 400, 13));
}

}  // namespace
}  // namespace argen::cuda
