// line_evict (LineAR) step by step on a small grid with controlled scores:
// which keys survive each line start, that the scores are the last line's
// only, that the anchors and the recent line are never evicted, its memory
// bound and its validation; then the reference on many grids.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "engine/sparse/policy_params.h"
#include "engine/sparse/tests/policy_harness.h"
#include "engine/sparse/tests/policy_reference.h"
#include "gtest/gtest.h"
#include "kernels/sparse/policy.h"

namespace argen::sparse {
namespace {

using test_util::PolicyRun;
using test_util::ReferencePolicy;
using V = std::vector<int32_t>;

V Sorted(V v) {
  std::sort(v.begin(), v.end());
  return v;
}

// The walk-through's attention: even positions 1, odd ones 0.5; position 0
// is attended heavily (100) by the first line's queries and least (0.1) after.
float WalkWeight(int32_t t, int32_t pos) {
  if (pos == 0) return t < 7 ? 100.0f : 0.1f;
  return pos % 2 == 0 ? 1.0f : 0.5f;
}

// Runs a policy on the walk-through's weights; returns the attended sets.
std::map<int32_t, V> Walk(const ResolvedPolicy& p) {
  PolicyRun run(p);
  std::map<int32_t, V> sets;
  for (int32_t t = 0; t < p.l_dec; ++t) {
    const V att = run.Plan(t);
    EXPECT_EQ(run.count(), AttendedCount(p, false, t)) << "t " << t;
    EXPECT_LE(run.count(), p.n_slots) << "t " << t;
    std::vector<float> probs;
    for (int32_t pos : att) probs.push_back(WalkWeight(t, pos));
    run.Observe(t, probs);
    sets[t] = Sorted(att);
  }
  return sets;
}

// Lines of 4 positions (width 4, or 3 codes + a row break as Lumina-mGPT
// lays rows out: the policy sees only the period), 6 lines, budget 10: a
// line start keeps 10 - 4 = 6 keys, the last line (4 positions, one of them
// the new key) among them.
TEST(LineEvictPolicy, WalkThroughOnAFourPositionLine) {
  for (const GridGeometry& grid : {GridGeometry{4, 0, 24}, GridGeometry{3, 1, 24}}) {
    PolicyParams params;
    params.kind = PolicyKind::kLineEvict;
    params.n_att = 10;
    auto p = ResolvePolicy(params, grid);
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->grid_period, 4);
    EXPECT_EQ(p->n_recent, 4);  // default: one line
    EXPECT_EQ(p->n_sink, 0);
    EXPECT_EQ(p->n_slots, 10);  // the memory bound is the budget
    EXPECT_EQ(KvBytes(*p, 10, 2, 4, 2, 8, 2), int64_t{2} * 2 * 4 * 2 * (10 + 10) * 8 * 2);
    const std::map<int32_t, V> sets = Walk(*p);
    // Before the cache fills nothing is evicted.
    EXPECT_EQ(sets.at(6), (V{0, 1, 2, 3, 4, 5, 6}));
    // t 7 (target 8 opens line 2): 7 keys, keep 6. Candidates 0..3 (4..6
    // and 7 are the recent line); scores of queries 3..6: 0 400, 1 and 3 2,
    // 2 4: the tie 1 / 3 goes to the oldest.
    EXPECT_EQ(sets.at(7), (V{0, 2, 3, 4, 5, 6, 7}));
    EXPECT_EQ(sets.at(10), (V{0, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
    // t 11: 10 keys, keep 6. Candidates 0, 2..7; scores of queries 7..10
    // only (0's 400 from the earlier line is gone): 0 0.4, odd 2, even 4.
    EXPECT_EQ(sets.at(11), (V{2, 4, 6, 8, 9, 10, 11}));
    // t 15: candidates 2, 4, 6, 8..11: 9 and 11 score 2, the evens 4: 9, 11,
    // then the oldest evens 2 and 4 go.
    EXPECT_EQ(sets.at(15), (V{6, 8, 10, 12, 13, 14, 15}));
    // Last step (target beyond the image): room for one key only, so one goes.
    EXPECT_EQ(sets.at(23).size(), 10u);
  }
}

// Anchors: the first n_sink decode positions stay whatever their score.
TEST(LineEvictPolicy, AnchorsAreNeverEvicted) {
  PolicyParams params;
  params.kind = PolicyKind::kLineEvict;
  params.n_att = 10;
  params.n_sink = 1;
  auto p = ResolvePolicy(params, GridGeometry{4, 0, 24});
  ASSERT_TRUE(p.ok()) << p.status();
  const std::map<int32_t, V> sets = Walk(*p);
  // As the walk-through at t 7 (0 scored highest anyway).
  EXPECT_EQ(sets.at(7), (V{0, 2, 3, 4, 5, 6, 7}));
  // t 11: 0 scores least but is the anchor; 3, 5, 7 and the oldest even go.
  EXPECT_EQ(sets.at(11), (V{0, 4, 6, 8, 9, 10, 11}));
  for (const auto& [t, set] : sets) EXPECT_TRUE(std::binary_search(set.begin(), set.end(), 0)) << "t " << t;
}

// A smaller recent window: only the n_recent newest positions are protected,
// older keys of the last line compete on their scores.
TEST(LineEvictPolicy, RecentWindowIsTheNRecentNewestPositions) {
  PolicyParams params;
  params.kind = PolicyKind::kLineEvict;
  params.n_att = 10;
  params.n_recent = 2;
  auto p = ResolvePolicy(params, GridGeometry{4, 0, 24});
  ASSERT_TRUE(p.ok()) << p.status();
  const std::map<int32_t, V> sets = Walk(*p);
  // t 7: candidates 0..5; 5 (queries 5, 6: 1) scores least and goes.
  EXPECT_EQ(sets.at(7), (V{0, 1, 2, 3, 4, 6, 7}));
  // t 11: protected 10 and 11; candidates 0..4, 6..9. Scores of queries
  // 7..10: 0 0.4; 9 (queries 9, 10) 1; 1, 3, 7 2; 8 (8..10) 3; 2, 4, 6 4.
  // Four go: 0, 9, then the oldest of the 2s, 1 and 3.
  EXPECT_EQ(sets.at(11), (V{2, 4, 6, 7, 8, 10, 11}));
}

// The budget never exceeds n_slots, reaches it, and the count per step is
// AttendedCount's: the kept keys plus the keys of the line so far.
TEST(LineEvictPolicy, CountsFollowTheLines) {
  PolicyParams params;
  params.kind = PolicyKind::kLineEvict;
  params.sparsity = 0.9;  // 58 of 576
  auto p = ResolvePolicy(params, GridGeometry{24, 0, 576});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->n_att, 58);
  EXPECT_EQ(p->n_slots, 58);
  int32_t most = 0;
  for (int32_t t = 0; t < 576; ++t) most = std::max(most, AttendedCount(*p, false, t));
  EXPECT_EQ(most, 58);
  EXPECT_EQ(AttendedCount(*p, false, 22), 23);       // line 0, target 23
  EXPECT_EQ(AttendedCount(*p, false, 23), 24);       // line start, 23 keys <= 34 kept
  EXPECT_EQ(AttendedCount(*p, false, 47), 34 + 1);   // line start: cut to 58 - 24
  EXPECT_EQ(AttendedCount(*p, false, 70), 34 + 24);  // the line's last step: the budget
  EXPECT_LT(MeanAttendedKeys(*p), 58.0);
}

TEST(LineEvictPolicy, Validation) {
  PolicyParams params;
  params.kind = PolicyKind::kLineEvict;
  // The default recent window is a line where the budget has room (90%:
  // 58 keys), else what the budget leaves after the new line and one scored
  // key (95%: 29 - 24 - 1 = 4).
  params.sparsity = 0.9;
  auto p = ResolvePolicy(params, GridGeometry{24, 0, 576});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->n_recent, 24);
  params.sparsity = 0.95;
  p = ResolvePolicy(params, GridGeometry{24, 0, 576});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->n_recent, 4);
  // 96%: 23 keys hold no line + a recent key + a scored key.
  params.sparsity = 0.96;
  p = ResolvePolicy(params, GridGeometry{24, 0, 576});
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("policy.sparsity: leaves 23 keys; the budget must be >= one line (24) + "
                                      "n_sink (0) + n_recent (1) + 1 scored key = 26"),
            std::string::npos)
      << p.status();
  // An explicit window too large for the budget: the error names it.
  params.sparsity = 0.95;
  params.n_recent = 5;
  p = ResolvePolicy(params, GridGeometry{24, 0, 576});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("policy.n_recent:"), std::string::npos) << p.status();
  // n_att given directly: the error names it.
  PolicyParams direct;
  direct.kind = PolicyKind::kLineEvict;
  direct.n_att = 20;
  p = ResolvePolicy(direct, GridGeometry{24, 0, 576});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("policy.n_att:"), std::string::npos) << p.status();
  // The grid is needed.
  p = ResolvePolicy(direct, GridGeometry{0, 0, 576 + 1});
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("grid width"), std::string::npos) << p.status();
  // Names and parameters.
  EXPECT_EQ(*ParsePolicyName("line_evict"), PolicyKind::kLineEvict);
  EXPECT_EQ(PolicyName(PolicyKind::kLineEvict), "line_evict");
  EXPECT_EQ(PolicyParameterNames(PolicyKind::kLineEvict),
            (std::vector<std::string_view>{"sparsity", "n_att", "n_recent", "n_sink"}));
}

// Sparsity 0 is dense, slot for slot, on grids with and without row breaks.
TEST(LineEvictPolicy, SparsityZeroIsDense) {
  for (const GridGeometry& grid : {GridGeometry{24, 0, 576}, GridGeometry{7, 1, 40}, GridGeometry{1, 0, 6}}) {
    auto dense = ResolvePolicy(PolicyParams{}, grid);
    PolicyParams params;
    params.kind = PolicyKind::kLineEvict;
    auto p = ResolvePolicy(params, grid);
    ASSERT_TRUE(dense.ok() && p.ok()) << p.status();
    PolicyRun a(*p), b(*dense);
    for (int32_t t = 0; t < grid.l_dec; ++t) {
      ASSERT_EQ(a.Plan(t), b.Plan(t)) << "t " << t;
      ASSERT_EQ(a.attended_slots(), b.attended_slots()) << "t " << t;
      a.Observe(t, std::vector<float>(a.count(), 1.0f));
    }
  }
}

// Pseudo-random weights, many grids and parameters: every step equals the
// position-space reference (policy_reference.h) and stays in its slots.
TEST(LineEvictPolicy, MatchesReferenceOnManyGrids) {
  const GridGeometry grids[] = {{24, 0, 576}, {6, 0, 36}, {7, 1, 40}, {5, 2, 28}, {1, 0, 10}, {16, 1, 204}};
  uint32_t x = 12345;
  auto weight = [&x] {
    x = x * 1664525u + 1013904223u;
    return static_cast<float>((x >> 8) & 0xffff) / 65536.0f + 1e-4f;
  };
  int runs = 0;
  for (const GridGeometry& grid : grids)
    for (double s : {0.0, 0.5, 0.8, 0.9})
      for (int32_t n_sink : {-1, 2})
        for (int32_t n_recent : {0, 1, 3}) {
          PolicyParams params;
          params.kind = PolicyKind::kLineEvict;
          params.sparsity = s;
          params.n_sink = n_sink;
          params.n_recent = n_recent;
          auto p = ResolvePolicy(params, grid);
          if (!p.ok()) continue;  // too small a budget for the lines
          SCOPED_TRACE(::testing::Message() << "grid " << grid.width << "+" << grid.row_break_tokens << " sparsity "
                                            << s << " n_sink " << n_sink << " n_recent " << n_recent);
          PolicyRun run(*p);
          ReferencePolicy ref(*p);
          for (int32_t t = 0; t < grid.l_dec; ++t) {
            const V att = run.Plan(t);
            const V expect = ref.Plan(t);
            ASSERT_EQ(Sorted(att), expect) << "t " << t;
            ASSERT_EQ(run.count(), AttendedCount(*p, false, t));
            for (int32_t i = 0; i < run.count(); ++i) {
              ASSERT_GE(run.attended_slots()[i], 0);
              ASSERT_LT(run.attended_slots()[i], p->n_slots);
            }
            std::map<int32_t, float> w;
            for (int32_t pos : expect) w[pos] = weight();
            std::vector<float> probs, ref_probs;
            for (int32_t pos : att) probs.push_back(w[pos]);
            for (int32_t pos : expect) ref_probs.push_back(w[pos]);
            run.Observe(t, probs);
            ref.Observe(t, ref_probs);
          }
          ++runs;
        }
  EXPECT_GT(runs, 40);
}

}  // namespace
}  // namespace argen::sparse
