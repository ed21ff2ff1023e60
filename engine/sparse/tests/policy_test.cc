// The diagonal policy on the paper's Fig. 12 walk-through (N_r = 7,
// N_att = 4), step by step, plus layout and KV-bound facts.
#include <algorithm>
#include <vector>

#include "engine/sparse/policy_params.h"
#include "engine/sparse/tests/policy_harness.h"
#include "gtest/gtest.h"
#include "kernels/sparse/policy.h"

namespace argen::sparse {
namespace {

using test_util::PolicyRun;
using V = std::vector<int32_t>;

// Weights over the attended positions: uniform except `low`, which gets the
// smallest weight (the controlled score pattern of the walk-through).
std::vector<float> ProbsWithMinimumAt(const std::vector<int32_t>& positions, int32_t low) {
  std::vector<float> p(positions.size(), 1.0f);
  float sum = 0;
  for (size_t i = 0; i < positions.size(); ++i) {
    if (positions[i] == low) p[i] = 0.1f;
    sum += p[i];
  }
  for (float& x : p) x /= sum;
  return p;
}

TEST(DiagonalPolicy, Fig12WalkThrough) {
  PolicyParams params;
  params.kind = PolicyKind::kDiagonal;
  params.n_att = 4;
  params.n_recent = 7;
  auto policy = ResolvePolicy(params, /*l_dec=*/12);
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_EQ(policy->n_slots, 7);
  PolicyRun run(*policy);

  struct Expect {
    V attended;       // decode positions attended at step t
    V skipped;        // positions inside the window skipped at step t
    int32_t evicted;  // position whose KV the new token overwrote (-1: none)
    int32_t low;      // position given the lowest weight at step t
    V skipped_after;  // skip lags (t+1 - position) after observing step t
  };
  // Paper, section 4: t=3 selects K0; at t=4 skip_idx = [1], Q4 attends
  // {K0, K2, K3, K4} and selects K2; at t=5 skip_idx = [2, 3]; the set stops
  // growing at N_r - N_att = 3 entries; from t=7 the oldest key is evicted.
  const std::vector<Expect> steps = {
      /*t=0*/ {{0}, {}, -1, -1, {}},
      /*t=1*/ {{0, 1}, {}, -1, -1, {}},
      /*t=2*/ {{0, 1, 2}, {}, -1, -1, {}},
      /*t=3*/ {{0, 1, 2, 3}, {}, -1, 0, {3}},
      /*t=4*/ {{0, 2, 3, 4}, {1}, -1, 2, {3, 2}},
      /*t=5*/ {{0, 1, 4, 5}, {2, 3}, -1, 4, {3, 2, 1}},
      /*t=6*/ {{0, 1, 2, 6}, {3, 4, 5}, -1, 1, {3, 2, 1}},
      /*t=7*/ {{1, 2, 3, 7}, {4, 5, 6}, 0, 2, {3, 2, 1}},
      /*t=8*/ {{2, 3, 4, 8}, {5, 6, 7}, 1, 3, {3, 2, 1}},
      /*t=9*/ {{3, 4, 5, 9}, {6, 7, 8}, 2, 9, {3, 2, 1}},
  };
  for (int32_t t = 0; t < static_cast<int32_t>(steps.size()); ++t) {
    SCOPED_TRACE(::testing::Message() << "t=" << t);
    const Expect& e = steps[t];
    int32_t evicted = -2;
    const V attended = run.Plan(t, &evicted);
    ASSERT_EQ(run.count(), static_cast<int32_t>(e.attended.size()));
    EXPECT_EQ(attended, e.attended);  // listed oldest first
    EXPECT_EQ(evicted, e.evicted);
    // Skipped = window minus attended; the window is the last N_r positions.
    V window_minus;
    for (int32_t pos = std::max(0, t - 6); pos <= t; ++pos) {
      if (std::find(attended.begin(), attended.end(), pos) == attended.end()) window_minus.push_back(pos);
    }
    EXPECT_EQ(window_minus, e.skipped);
    EXPECT_EQ(ObserveNeeded(*policy, run.layout(), run.state(), t), e.low >= 0 && t <= 5);
    run.Observe(t, ProbsWithMinimumAt(attended, e.low));
    EXPECT_EQ(run.SkipLags(), e.skipped_after);
  }
}

TEST(DiagonalPolicy, NewestKeyCanBeSkippedAlongItsDiagonal) {
  // If the new token itself gets the lowest weight, lag 0 is skipped: every
  // later query skips its own key (the diagonal through the main diagonal).
  PolicyParams params;
  params.kind = PolicyKind::kDiagonal;
  params.n_att = 3;
  params.n_recent = 4;
  auto policy = ResolvePolicy(params, 10);
  ASSERT_TRUE(policy.ok());
  PolicyRun run(*policy);
  // Selection starts at t = N_att - 1 = 2; the skip set holds N_r - N_att = 1 lag.
  for (int32_t t = 0; t < 2; ++t) run.Observe(t, ProbsWithMinimumAt(run.Plan(t), -1));
  const V a2 = run.Plan(2);
  EXPECT_EQ(a2, (V{0, 1, 2}));
  run.Observe(2, ProbsWithMinimumAt(a2, 2));
  EXPECT_EQ(run.SkipLags(), V{0});
  for (int32_t t = 3; t < 4; ++t) EXPECT_EQ(run.Plan(t), (V{0, 1, 2}));
  for (int32_t t = 4; t < 10; ++t) {
    const V a = run.Plan(t);
    EXPECT_EQ(static_cast<int32_t>(a.size()), 3);
    EXPECT_EQ(std::find(a.begin(), a.end(), t), a.end()) << "t=" << t;
    EXPECT_EQ(a, (V{t - 3, t - 2, t - 1}));
  }
}

TEST(PolicyLayout, KvBytesIsExactForTheLayout) {
  PolicyParams params;
  params.kind = PolicyKind::kDiagonal;
  params.sparsity = 0.95;
  auto p = ResolvePolicy(params, 576);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->n_att, 29);      // round(0.05 * 576) = round(28.8)
  EXPECT_EQ(p->n_recent, 288);  // 0.5 * L_dec
  EXPECT_EQ(p->n_slots, 288);
  // 2 rows (CFG pair), 24 layers, 16 kv heads, head_dim 128, f32:
  // K and V of (L_p + n_slots) positions.
  EXPECT_EQ(KvBytes(*p, 50, 2, 24, 16, 128, 4), int64_t{2} * 2 * 24 * 16 * (50 + 288) * 128 * 4);
  const PolicyLayout l = LayoutFor(*p);
  EXPECT_EQ(l.max_attended, 29);
  EXPECT_EQ(l.lag_capacity, 29);
  EXPECT_EQ(l.skip_capacity, 288 - 29);
  EXPECT_EQ(l.floats_per_head, 0);
}

TEST(PolicyLayout, PlanStepRejectsOutOfOrderSteps) {
  PolicyParams params;
  params.kind = PolicyKind::kSlidingWindow;
  params.n_att = 3;
  auto p = ResolvePolicy(params, 5);
  ASSERT_TRUE(p.ok());
  PolicyRun run(*p);
  EXPECT_TRUE(run.Plan(1).empty());
  EXPECT_EQ(run.count(), -1);
  for (int32_t t = 0; t < 5; ++t) EXPECT_EQ(static_cast<int32_t>(run.Plan(t).size()), std::min(t + 1, 3));
  run.Plan(5);
  EXPECT_EQ(run.count(), -1);  // past l_dec
}

// The split observe of the diagonal policies (what the CUDA backend runs: the
// attention kernel's argmin from DiagonalSelectionFirst, then
// ApplyDiagonalSelection) equals ObserveStep at every step, ties included, and
// the selection's first entry is n_sink wherever a selection happens.
TEST(DiagonalPolicy, FusedArgminSelectionEqualsObserveStep) {
  for (PolicyKind kind : {PolicyKind::kDiagonal, PolicyKind::kDiagonalSink4})
    for (double sparsity : {0.6, 0.8, 0.95}) {
      PolicyParams params;
      params.kind = kind;
      params.sparsity = sparsity;
      auto p = ResolvePolicy(params, 96);
      ASSERT_TRUE(p.ok()) << p.status();
      PolicyRun a(*p), b(*p);
      uint32_t seed = 17;
      int selections = 0;
      for (int32_t t = 0; t < p->l_dec; ++t) {
        a.Plan(t);
        b.Plan(t);
        ASSERT_EQ(a.count(), b.count());
        const int32_t n = a.count();
        // Few distinct values: many exact ties.
        std::vector<float> probs(n);
        for (auto& x : probs) {
          seed = seed * 1664525u + 1013904223u;
          x = 0.125f * static_cast<float>((seed >> 24) % 4 + 1);
        }
        const bool needed = ObserveNeeded(*p, a.layout(), a.state(), t);
        if (needed) {
          ++selections;
          EXPECT_EQ(n - a.state().ints[kStateLagCount], DiagonalSelectionFirst(*p)) << "t " << t;
        }
        a.Observe(t, probs);
        ApplyDiagonalSelection(*p, b.layout(), b.state(), t, n,
                               ArgminFrom(probs.data(), DiagonalSelectionFirst(*p), n));
        ASSERT_EQ(a.SkipLags(), b.SkipLags()) << "t " << t;
        for (int32_t i = 0; i < b.layout().ints_per_head; ++i)
          ASSERT_EQ(a.state().ints[i], b.state().ints[i]) << "t " << t << " int " << i;
      }
      EXPECT_GT(selections, 0);
    }
}

// PlanStepState + AttendedSlot write the list PlanStep writes, for every policy.
TEST(PolicyLayout, AttendedSlotMatchesPlanStep) {
  for (PolicyKind kind : {PolicyKind::kDense, PolicyKind::kSlidingWindow, PolicyKind::kStreamingLlm, PolicyKind::kH2O,
                          PolicyKind::kTova, PolicyKind::kAlisa, PolicyKind::kDiagonal, PolicyKind::kDiagonalSink4}) {
    PolicyParams params;
    params.kind = kind;
    params.sparsity = kind == PolicyKind::kDense ? 0.0 : 0.8;
    auto p = ResolvePolicy(params, 64);
    ASSERT_TRUE(p.ok()) << p.status();
    PolicyRun run(*p);
    for (int32_t t = 0; t < p->l_dec; ++t) {
      run.Plan(t);
      ASSERT_GE(run.count(), 0);
      for (int32_t i = 0; i < run.count(); ++i)
        ASSERT_EQ(AttendedSlot(*p, run.layout(), run.state(), t, i), run.attended_slots()[i]) << "t " << t;
      std::vector<float> probs(run.count(), 1.0f / (run.count() + 1));
      if (run.count() > 0) probs[run.count() / 2] *= 0.5f;
      run.Observe(t, probs);
    }
  }
}

}  // namespace
}  // namespace argen::sparse
