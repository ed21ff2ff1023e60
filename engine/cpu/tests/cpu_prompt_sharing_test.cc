// Prompt-KV sharing on the CPU backend (the reference): a request's images
// reading one copy of each prompt's KV give the same bytes as a copy per
// image, the ledger counts the shared bytes once and frees them with the last
// row, and misuse is an InvalidArgument naming the row.
#include <cstring>
#include <vector>

#include "engine/cpu/tests/golden_util.h"
#include "engine/kv/kv_manager.h"
#include "engine/model/tests/prompt_sharing_harness.h"
#include "engine/sparse/policy_params.h"

namespace argen::cpu {
namespace {

using model::testing::GroupRun;
using model::testing::RunGroup;

constexpr int kLDec = 24;

sparse::ResolvedPolicy Policy(sparse::PolicyKind kind, double sparsity, sparse::KvFormat format) {
  return model::testing::SharingPolicy(kind, sparsity, format, kLDec);
}

testing::LoadedBackend Tiny(int64_t budget = 0) {
  model::BackendOptions options;
  options.max_batch_rows = 16;
  options.kv_budget_bytes = budget;
  return testing::LoadTinyBackend("tests/goldens/tiny/tiny-mha", 0.0f, options);
}

const std::vector<int32_t>& kCond = model::testing::kSharingCond;
const std::vector<int32_t>& kUncond = model::testing::kSharingUncond;

TEST(CpuPromptSharingTest, SharedPromptGivesIdenticalBytesForEveryPolicyKind) {
  testing::LoadedBackend loaded = Tiny();
  ASSERT_NE(loaded.backend, nullptr);
  model::Backend& be = *loaded.backend;
  const std::vector<model::testing::NamedPolicy> cases = model::testing::SharingCases(kLDec);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    GroupRun copies, shared;
    ASSERT_NO_FATAL_FAILURE(RunGroup(be, c.policy, kCond, kUncond, {3, false, kLDec - 1, false}, &copies));
    ASSERT_NO_FATAL_FAILURE(RunGroup(be, c.policy, kCond, kUncond, {3, true, kLDec - 1, true}, &shared));
    ASSERT_EQ(copies.logits.size(), shared.logits.size());
    for (size_t s = 0; s < copies.logits.size(); ++s) {
      ASSERT_EQ(copies.sampled[s], shared.sampled[s]) << "step " << s;
      ASSERT_EQ(0, std::memcmp(copies.logits[s].data(), shared.logits[s].data(), copies.logits[s].size() * 4))
          << "step " << s << ": logits differ";
    }
    // 2 prompt regions + 6 decode regions instead of 6 full rows.
    const int lc = static_cast<int>(kCond.size()), lu = static_cast<int>(kUncond.size());
    EXPECT_EQ(copies.kv_bytes, 3 * (be.RowBytes(lc, c.policy) + be.RowBytes(lu, c.policy)));
    EXPECT_EQ(shared.kv_bytes, be.RowBytes(lc, c.policy) + be.RowBytes(lu, c.policy) +
                                   2 * (be.SharingRowBytes(lc, c.policy) + be.SharingRowBytes(lu, c.policy)));
    EXPECT_LT(shared.kv_bytes, copies.kv_bytes);
  }
}

TEST(CpuPromptSharingTest, MisuseIsAnInvalidArgumentNamingTheRow) {
  testing::LoadedBackend loaded = Tiny();
  ASSERT_NE(loaded.backend, nullptr);
  model::Backend& be = *loaded.backend;
  kv::KvManager kv(be);
  const sparse::ResolvedPolicy p = Policy(sparse::PolicyKind::kDiagonal, 0.5, sparse::KvFormat::kAuto);
  const int32_t lc = static_cast<int32_t>(kCond.size()), lu = static_cast<int32_t>(kUncond.size());
  absl::StatusOr<model::RowId> c0 = kv.AllocateRow(lc, p), u0 = kv.AllocateRow(lu, p);
  ASSERT_TRUE(c0.ok() && u0.ok());
  absl::StatusOr<model::RowId> c1 = kv.AllocateSharingRow(*c0, p), u1 = kv.AllocateSharingRow(*u0, p);
  ASSERT_TRUE(c1.ok() && u1.ok());
  // An owner must hold its prompt: a sharer or an unknown row cannot own.
  EXPECT_EQ(kv.AllocateSharingRow(*c1, p).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(kv.AllocateSharingRow(9999, p).status().code(), absl::StatusCode::kInvalidArgument);

  std::vector<model::SamplingSpec> sampling(1);
  std::vector<int32_t> sampled(1);
  // A sharing pair without its owners in the batch.
  {
    std::vector<model::RowId> rows = {*c1, *u1};
    std::vector<int32_t> tokens = kCond, offsets = {0, lc, lc + lu};
    tokens.insert(tokens.end(), kUncond.begin(), kUncond.end());
    absl::Status s = be.Prefill({rows, offsets, tokens, sampling}, {sampled, nullptr});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("not in this batch"), std::string::npos) << s;
  }
  // A sharer whose prompt differs from its owner's.
  {
    std::vector<model::RowId> rows = {*c0, *u0, *c1, *u1};
    std::vector<int32_t> tokens, offsets = {0};
    for (const auto* prompt : {&kCond, &kUncond, &kCond, &kCond}) {
      tokens.insert(tokens.end(), prompt->begin(), prompt->end());
      offsets.push_back(static_cast<int32_t>(tokens.size()));
    }
    std::vector<model::SamplingSpec> two(2);
    std::vector<int32_t> out(2);
    absl::Status s = be.Prefill({rows, offsets, tokens, two}, {out, nullptr});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find("rows[3]"), std::string::npos) << s;
    EXPECT_NE(s.message().find("differ from the owner's"), std::string::npos) << s;
  }
  // A freed owner is gone for the batch checks at once, though its region stays.
  const int64_t in_use = kv.BytesInUse();
  kv.FreeRow(*c0);
  EXPECT_EQ(kv.BytesInUse(), in_use);
  {
    std::vector<model::RowId> rows = {*c0, *u0};
    std::vector<int32_t> tokens = kCond, offsets = {0, lc, lc + lu};
    tokens.insert(tokens.end(), kUncond.begin(), kUncond.end());
    absl::Status s = be.Prefill({rows, offsets, tokens, sampling}, {sampled, nullptr});
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("is not an allocated row"), std::string::npos) << s;
  }
  EXPECT_EQ(kv.AllocateSharingRow(*c0, p).status().code(), absl::StatusCode::kInvalidArgument);
  kv.FreeRow(*c0);  // twice: ignored
  EXPECT_EQ(kv.BytesInUse(), in_use);
  kv.FreeRow(*c1);  // the last sharer of c0: both regions go
  EXPECT_EQ(kv.BytesInUse(), in_use - be.RowBytes(lc, p) - be.SharingRowBytes(lc, p));
  kv.FreeRow(*u0);
  kv.FreeRow(*u1);
  EXPECT_EQ(kv.BytesInUse(), 0);
}

// A backend whose pool has room for about a dozen dense images.
testing::LoadedBackend WalkBackend(const sparse::ResolvedPolicy& dense) {
  testing::LoadedBackend probe = Tiny();
  EXPECT_NE(probe.backend, nullptr);
  if (probe.backend == nullptr) return {};
  return Tiny(12 * 2 * probe.backend->RowBytes(8, dense));
}

TEST(CpuPromptSharingTest, LedgerStaysExactUnderRandomAdmissionAndFrees) {
  const sparse::ResolvedPolicy dense = Policy(sparse::PolicyKind::kDense, 0, sparse::KvFormat::kAuto);
  const sparse::ResolvedPolicy diagonal = Policy(sparse::PolicyKind::kDiagonal, 0.75, sparse::KvFormat::kAuto);
  testing::LoadedBackend loaded = WalkBackend(dense);
  ASSERT_NE(loaded.backend, nullptr);
  ASSERT_NO_FATAL_FAILURE(model::testing::RandomLedgerWalk(*loaded.backend, {&dense, &diagonal}, 400, 7));
}

TEST(CpuPromptSharingTest, PromptRowsServeLaterRequestsWithIdenticalBytes) {
  testing::LoadedBackend loaded = Tiny();
  ASSERT_NE(loaded.backend, nullptr);
  model::Backend& be = *loaded.backend;
  const std::vector<model::testing::NamedPolicy> cases = model::testing::SharingCases(kLDec);
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    model::testing::AcrossRun own, shared;
    ASSERT_NO_FATAL_FAILURE(model::testing::RunAcrossRequests(be, c.policy, false, 8, &own));
    ASSERT_NO_FATAL_FAILURE(model::testing::RunAcrossRequests(be, c.policy, true, 8, &shared));
    ASSERT_EQ(own.logits.size(), shared.logits.size());
    for (size_t s = 0; s < own.logits.size(); ++s) {
      ASSERT_EQ(own.sampled[s], shared.sampled[s]) << "call " << s;
      ASSERT_EQ(0, std::memcmp(own.logits[s].data(), shared.logits[s].data(), own.logits[s].size() * 4))
          << "call " << s << ": logits differ";
    }
    // The ledger: prompt rows and decode-slot rows, the shared prompt once.
    model::testing::ExpectAcrossLedger(be, c.policy, shared);
    EXPECT_LT(shared.kv_bytes[1], own.kv_bytes[1]);
    const int lc = static_cast<int>(kCond.size());
    EXPECT_EQ(be.PromptRowBytes(lc, c.policy.kv_format),
              lc * be.KvBytesPerTokenRow() + loaded.spec.stack.hidden_size * 4);
  }
}

TEST(CpuPromptSharingTest, PromptRowMisuseIsAnInvalidArgumentNamingTheRow) {
  testing::LoadedBackend loaded = Tiny();
  ASSERT_NE(loaded.backend, nullptr);
  model::Backend& be = *loaded.backend;
  kv::KvManager kv(be);
  const sparse::ResolvedPolicy p = Policy(sparse::PolicyKind::kDiagonal, 0.5, sparse::KvFormat::kAuto);
  const sparse::ResolvedPolicy fp8 = Policy(sparse::PolicyKind::kDiagonal, 0.5, sparse::KvFormat::kFp8E4m3);
  const int32_t lc = static_cast<int32_t>(kCond.size()), lu = static_cast<int32_t>(kUncond.size());
  EXPECT_EQ(kv.AllocatePromptRow(0, sparse::KvFormat::kAuto).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(kv.AllocatePromptRow(lc, static_cast<sparse::KvFormat>(7)).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<model::RowId> pc = kv.AllocatePromptRow(lc, sparse::KvFormat::kAuto);
  absl::StatusOr<model::RowId> pu = kv.AllocatePromptRow(lu, sparse::KvFormat::kAuto);
  ASSERT_TRUE(pc.ok() && pu.ok());
  // Its readers store KV in its format.
  absl::Status wrong_format = kv.AllocateSharingRow(*pc, fp8).status();
  EXPECT_EQ(wrong_format.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(wrong_format.message().find("stores its KV as"), std::string::npos) << wrong_format;
  absl::StatusOr<model::RowId> c = kv.AllocateSharingRow(*pc, p), u = kv.AllocateSharingRow(*pu, p);
  ASSERT_TRUE(c.ok() && u.ok());
  std::vector<model::SamplingSpec> sampling(1);
  std::vector<int32_t> sampled(1), none;
  std::vector<int32_t> pair_tokens = kCond, pair_offsets = {0, lc, lc + lu};
  pair_tokens.insert(pair_tokens.end(), kUncond.begin(), kUncond.end());
  const auto expect_error = [](const absl::Status& s, const std::string& part) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find(part), std::string::npos) << s;
  };
  // A prompt row is listed in prompt_rows, a row in rows.
  {
    std::vector<model::RowId> rows = {*pc, *pu};
    expect_error(be.Prefill({rows, pair_offsets, pair_tokens, sampling}, {sampled, nullptr}),
                 "rows[0] = " + std::to_string(*pc) + " is a prompt row");
    std::vector<model::RowId> fills = {*c};
    std::vector<int32_t> offsets = {0, lc};
    expect_error(be.Prefill({{}, offsets, kCond, {}, fills}, {none, nullptr}), "is not a prompt row");
  }
  // Readers of unfilled prompt rows outside the call.
  expect_error(be.Prefill({std::vector<model::RowId>{*c, *u}, pair_offsets, pair_tokens, sampling}, {sampled, nullptr}),
               "not in this batch");
  // A call of prompt rows alone fills them and samples nothing.
  {
    std::vector<model::RowId> fills = {*pc, *pu};
    ASSERT_TRUE(be.Prefill({{}, pair_offsets, pair_tokens, {}, fills}, {none, nullptr}).ok());
    expect_error(be.Prefill({{}, pair_offsets, pair_tokens, {}, fills}, {none, nullptr}), "was already prefilled");
  }
  // A reader of a filled prompt row must have its tokens.
  {
    std::vector<int32_t> other = kCond;
    other[1] += 1;
    other.insert(other.end(), kUncond.begin(), kUncond.end());
    expect_error(be.Prefill({std::vector<model::RowId>{*c, *u}, pair_offsets, other, sampling}, {sampled, nullptr}),
                 "differ from the prompt row's");
  }
  ASSERT_TRUE(
      be.Prefill({std::vector<model::RowId>{*c, *u}, pair_offsets, pair_tokens, sampling}, {sampled, nullptr}).ok());
  // A prompt row decodes nothing.
  {
    std::vector<model::RowId> rows = {*pc, *pu};
    std::vector<int32_t> ids = {be.spec().input.sampled_offset}, steps = {0};
    EXPECT_EQ(be.Decode({rows, ids, steps, sampling}, {sampled, nullptr}).code(), absl::StatusCode::kInvalidArgument);
  }
  // Freed with readers: hidden, its bytes kept until the last reader goes.
  const int64_t in_use = kv.BytesInUse();
  kv.FreeRow(*pc);
  EXPECT_EQ(kv.BytesInUse(), in_use);
  EXPECT_EQ(kv.AllocateSharingRow(*pc, p).status().code(), absl::StatusCode::kInvalidArgument);
  kv.FreeRow(*c);
  EXPECT_EQ(kv.BytesInUse(), in_use - be.SharingRowBytes(lc, p) - be.PromptRowBytes(lc, sparse::KvFormat::kAuto));
  kv.FreeRow(*u);
  kv.FreeRow(*pu);
  EXPECT_EQ(kv.BytesInUse(), 0);
}

TEST(CpuPromptSharingTest, PromptRowLedgerStaysExactUnderRandomAdmissionAndFrees) {
  const sparse::ResolvedPolicy dense = Policy(sparse::PolicyKind::kDense, 0, sparse::KvFormat::kAuto);
  const sparse::ResolvedPolicy diagonal = Policy(sparse::PolicyKind::kDiagonal, 0.75, sparse::KvFormat::kAuto);
  const sparse::ResolvedPolicy fp8 = Policy(sparse::PolicyKind::kDiagonal, 0.75, sparse::KvFormat::kFp8E4m3);
  testing::LoadedBackend loaded = WalkBackend(dense);
  ASSERT_NE(loaded.backend, nullptr);
  ASSERT_NO_FATAL_FAILURE(model::testing::RandomPromptRowWalk(*loaded.backend, {&dense, &diagonal, &fp8}, 400, 11));
}

}  // namespace
}  // namespace argen::cpu
