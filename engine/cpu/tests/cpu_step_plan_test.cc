// The step plan on the CPU backend (engine/model/step_plan.h):
// * teacher forcing: a pair's prompt fed in chunks and its image tokens k at
//   a time in one step write the same KV and policy state and give the same
//   logits and samples as a whole prompt and one token per step, for dense,
//   every sparse policy and fp8 KV. Exact (bitwise) with row-invariant GEMMs
//   (cpu::SetRowInvariantGemms: OpenBLAS rounds a row differently at different row
//   counts, the only difference between the two feeds); with the production
//   GEMMs within float rounding;
// * the plan's validation: every malformed plan is InvalidArgument naming
//   what is wrong, and changes no row.
#include <string>
#include <vector>

#include "engine/cpu/gemm.h"
#include "engine/cpu/tests/golden_util.h"
#include "engine/kv/kv_manager.h"
#include "engine/model/step_checks.h"
#include "engine/model/tests/step_plan_harness.h"

namespace argen::cpu {
namespace {

using model::QueryKind;
using model::testing::ForcedRun;
using model::testing::RunForced;

constexpr int32_t kLDec = 36;  // a 6 x 6 grid

class CpuStepPlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model::BackendOptions options;
    options.max_batch_rows = 8;
    options.threads = 2;
    loaded_ = testing::LoadTinyBackend("tests/goldens/tiny/tiny-gqa-sharded", 0.0f, options);
    ASSERT_NE(loaded_.backend, nullptr);
    kv_ = std::make_unique<kv::KvManager>(backend());
  }
  void TearDown() override { SetRowInvariantGemms(false); }
  CpuBackend& backend() { return static_cast<CpuBackend&>(*loaded_.backend); }
  kv::KvManager& kv() { return *kv_; }
  std::vector<model::testing::PolicyCase> Cases() {
    return model::testing::EveryPolicyCase(kLDec, loaded_.spec.stack.num_layers, loaded_.spec.stack.num_kv_heads);
  }
  std::vector<int32_t> Tokens() { return model::testing::ForcedTokens(kLDec - 1, loaded_.spec.input_rows()); }

  testing::LoadedBackend loaded_;
  std::unique_ptr<kv::KvManager> kv_;
};

// Rows a and b hold the same KV (prompt and decode slots) and policy state.
void ExpectSameRows(const KvRow& a, const KvRow& b, const std::string& what) {
  EXPECT_TRUE(a.k == b.k) << what << ": K differs";
  EXPECT_TRUE(a.v == b.v) << what << ": V differs";
  EXPECT_TRUE(a.policy_ints == b.policy_ints) << what << ": policy ints differ";
  EXPECT_TRUE(a.policy_floats == b.policy_floats) << what << ": policy floats differ";
  EXPECT_EQ(a.next_step, b.next_step) << what;
  EXPECT_EQ(a.prompt_filled, b.prompt_filled) << what;
}

struct Feed {
  int32_t prompt_chunk;  // 0: the whole prompt in one step
  int32_t k;             // image tokens per step
};
const Feed kFeeds[] = {{0, 2}, {0, 5}, {0, 35}, {1, 1}, {5, 5}, {3, 2}};

TEST_F(CpuStepPlanTest, TeacherForcedStepsAreExactWithRowInvariantGemms) {
  SetRowInvariantGemms(true);
  const std::vector<int32_t> tokens = Tokens();
  int cases = 0;
  for (const model::testing::PolicyCase& c : Cases()) {
    ForcedRun want;
    std::vector<model::RowId> want_rows;
    ASSERT_TRUE(RunForced(backend(), kv(), c.policy, tokens, 0, 1, &want, &want_rows).ok()) << c.name;
    ASSERT_EQ(want.logits.size(), tokens.size() + 1) << c.name;
    for (const Feed& f : kFeeds) {
      const std::string what =
          c.name + ", prompt chunk " + std::to_string(f.prompt_chunk) + ", k " + std::to_string(f.k);
      ForcedRun got;
      std::vector<model::RowId> got_rows;
      ASSERT_TRUE(RunForced(backend(), kv(), c.policy, tokens, f.prompt_chunk, f.k, &got, &got_rows).ok()) << what;
      const model::testing::RunDifference d = model::testing::Difference(got, want);
      EXPECT_TRUE(d.bitwise) << what << ": worst logit difference " << d.worst;
      EXPECT_EQ(d.differing_samples, 0) << what;
      for (int i = 0; i < 2; ++i) {
        ExpectSameRows(*backend().InspectRow(got_rows[i]), *backend().InspectRow(want_rows[i]), what);
      }
      for (model::RowId r : got_rows) kv().FreeRow(r);
      ++cases;
    }
    for (model::RowId r : want_rows) kv().FreeRow(r);
  }
  EXPECT_EQ(cases, 14 * static_cast<int>(std::size(kFeeds)));  // 12 kinds + 2 fp8 cases, every feed
  EXPECT_EQ(kv().BytesInUse(), 0);
}

TEST_F(CpuStepPlanTest, TeacherForcedStepsAgreeWithProductionGemms) {
  const std::vector<int32_t> tokens = Tokens();
  for (const model::testing::PolicyCase& c : Cases()) {
    ForcedRun want;
    ASSERT_TRUE(RunForced(backend(), kv(), c.policy, tokens, 0, 1, &want).ok()) << c.name;
    for (const Feed& f : kFeeds) {
      ForcedRun got;
      ASSERT_TRUE(RunForced(backend(), kv(), c.policy, tokens, f.prompt_chunk, f.k, &got).ok()) << c.name;
      const model::testing::RunDifference d = model::testing::Difference(got, want);
      // Float rounding of GEMMs over other row counts, carried through the
      // layers (a policy's choice may flip on a near tie; none did here).
      EXPECT_LT(d.worst, 1e-4) << c.name << ", chunk " << f.prompt_chunk << ", k " << f.k;
    }
  }
}

// The step that runs a row's tokens one at a time samples exactly what the
// generic engine's steps sample: the RNG is keyed by token index.
TEST_F(CpuStepPlanTest, SamplesAreKeyedByTokenIndex) {
  SetRowInvariantGemms(true);
  const sparse::ResolvedPolicy dense = Cases()[0].policy;
  const std::vector<int32_t> tokens = Tokens();
  ForcedRun one, all;
  ASSERT_TRUE(RunForced(backend(), kv(), dense, tokens, 0, 1, &one).ok());
  ASSERT_TRUE(RunForced(backend(), kv(), dense, tokens, 0, static_cast<int32_t>(tokens.size()), &all).ok());
  EXPECT_EQ(one.sampled, all.sampled);
  // The samples are not all one token (the check would be empty otherwise).
  EXPECT_GT(std::count_if(one.sampled.begin(), one.sampled.end(), [&](int32_t s) { return s != one.sampled[0]; }), 0);
}

class CpuStepPlanErrorsTest : public CpuStepPlanTest {
 protected:
  void SetUp() override {
    CpuStepPlanTest::SetUp();
    dense_ = Cases()[0].policy;
    for (int i = 0; i < 2; ++i) rows_.push_back(*kv().AllocateRow(3, dense_));
  }
  absl::Status Forward(int32_t outputs) {
    std::vector<int32_t> sampled(outputs);
    return backend().Forward(b_.Plan(), {sampled, nullptr});
  }
  void Pair(std::vector<model::Query> cond, std::vector<model::Query> uncond) {
    b_.Clear();
    b_.AddRow(rows_[0]);
    for (const model::Query& q : cond) b_.AddQuery(q.kind, q.input, q.index);
    b_.AddRow(rows_[1]);
    for (const model::Query& q : uncond) b_.AddQuery(q.kind, q.input, q.index);
    b_.AddSampling({});
  }
  static void ExpectMentions(const absl::Status& s, const std::string& what) {
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_NE(s.message().find(what), std::string::npos) << s;
  }
  void ExpectUnchanged() {
    for (model::RowId r : rows_) {
      const KvRow& row = *backend().InspectRow(r);
      EXPECT_EQ(row.prompt_filled, filled_) << r;
      EXPECT_EQ(row.next_step, next_) << r;
    }
  }

  sparse::ResolvedPolicy dense_;
  std::vector<model::RowId> rows_;
  model::StepPlanBuilder b_;
  int32_t filled_ = 0, next_ = 0;
};

constexpr QueryKind kP = QueryKind::kPrompt;
constexpr QueryKind kD = QueryKind::kDecode;

TEST_F(CpuStepPlanErrorsTest, MalformedPromptsAreRefusedAndChangeNothing) {
  Pair({{kP, 1, 0}, {kP, 2, 2}}, {{kP, 1, 0}});
  ExpectMentions(Forward(0), "prompt position 2 but the row expects 1");
  Pair({{kP, 1, 0}, {kD, 2, 0}}, {{kP, 1, 0}});
  ExpectMentions(Forward(0), "mixes prompt and decode");
  Pair({{kP, 1, 0}, {kP, 2, 1}, {kP, 3, 2}}, {{kP, 1, 0}});
  ExpectMentions(Forward(0), "must complete their prompts in the same step");
  Pair({{kP, 1, 0}, {kP, 512, 1}}, {{kP, 1, 0}});
  ExpectMentions(Forward(0), "token 512 is outside the text vocabulary");
  Pair({{kD, 1, 0}}, {{kD, 1, 0}});
  ExpectMentions(Forward(1), "has not been prefilled");
  Pair({{kP, 1, 0}, {kP, 2, 1}, {kP, 3, 2}}, {{kP, 1, 0}, {kP, 2, 1}, {kP, 3, 2}});
  ExpectMentions(Forward(0), "sampled has 0 entries, the plan has 1 output points");
  ExpectUnchanged();
  // A chunk, then the rest: fine.
  Pair({{kP, 1, 0}, {kP, 2, 1}}, {{kP, 1, 0}, {kP, 2, 1}});
  ASSERT_TRUE(Forward(0).ok());
  filled_ = 2;
  ExpectUnchanged();
  Pair({{kP, 3, 2}}, {{kP, 3, 2}});
  ASSERT_TRUE(Forward(1).ok());
  Pair({{kP, 3, 2}}, {{kP, 3, 2}});
  ExpectMentions(Forward(1), "already prefilled");
}

TEST_F(CpuStepPlanErrorsTest, MalformedDecodesAreRefusedAndChangeNothing) {
  Pair({{kP, 1, 0}, {kP, 2, 1}, {kP, 3, 2}}, {{kP, 1, 0}, {kP, 2, 1}, {kP, 3, 2}});
  ASSERT_TRUE(Forward(1).ok());
  filled_ = 3;
  Pair({{kD, 1, 0}, {kD, 2, 2}}, {{kD, 1, 0}, {kD, 2, 2}});
  ExpectMentions(Forward(2), "decode index 2 but the row expects 1");
  Pair({{kD, 1, 0}, {kD, 2, 1}}, {{kD, 1, 0}, {kD, 3, 1}});
  ExpectMentions(Forward(2), "must carry the same decode queries");
  Pair({{kD, 1, 0}}, {});
  ExpectMentions(Forward(1), "must carry the same decode queries");
  Pair({{kD, 64, 0}}, {{kD, 64, 0}});
  ExpectMentions(Forward(1), "outside the input table");
  Pair({{kD, 1, 64}}, {{kD, 1, 64}});
  ExpectMentions(Forward(1), "of l_dec");
  b_.Clear();
  b_.AddRow(rows_[0]);
  b_.AddQuery(kD, 1, 0);
  b_.AddSampling({});
  ExpectMentions(Forward(1), "even count");
  Pair({{kD, 1, 0}}, {{kD, 1, 0}});
  b_.AddSampling({});  // two for one pair
  ExpectMentions(Forward(1), "sampling one per pair");
  ExpectUnchanged();
  Pair({{kD, 1, 0}, {kD, 2, 1}, {kD, 3, 2}}, {{kD, 1, 0}, {kD, 2, 1}, {kD, 3, 2}});
  ASSERT_TRUE(Forward(3).ok());
  next_ = 3;
  ExpectUnchanged();
}

}  // namespace
}  // namespace argen::cpu
