// Out-of-order planning (parallel decoding; kernels/sparse/policy.h
// PlanOutOfOrderQuery, docs/policies.md "Several queries per row") against
// an independent reference written here in decode positions: along ZipAR
// schedules (engine/model/parallel_schedule.h) on Janus-Pro's 24 x 24 grid
// and a Lumina-mGPT grid with row breaks, every query attends exactly the
// reference's positions in the same order (the policy's raster set for t
// restricted to written, resident keys; diagonal's nearest N_att' window lags
// not skipped; selections by the same argmin), within the admitted bounds.
// And: planned out of order in order, every policy attends PlanStep's keys.
#include <algorithm>
#include <cstdint>
#include <set>
#include <vector>

#include "engine/model/parallel_schedule.h"
#include "engine/sparse/policy_params.h"
#include "gtest/gtest.h"
#include "kernels/sparse/policy.h"

namespace argen::sparse {
namespace {

// Deterministic weights for query q's entry i (shared by both sides; ties happen).
float Weight(int32_t q, int32_t i) { return static_cast<float>(((q * 7919 + i * 104729) % 13) + 1) / 16.0f; }

// The definition in positions, independent of the slot state.
class Reference {
 public:
  explicit Reference(const ResolvedPolicy& p)
      : p_(p),
        holder_(p.n_slots, -1),
        written_(p.l_dec, 0),
        diagonal_(p.kind == PolicyKind::kDiagonal || p.kind == PolicyKind::kDiagonalSink4) {}

  // The attended positions of the query at t (ascending; t itself last when attended).
  std::vector<int32_t> Query(int32_t t, bool writes, int32_t query_number) {
    const int32_t window = p_.n_slots - p_.n_sink;
    const int32_t own = t < p_.n_sink ? t : p_.n_sink + (t - p_.n_sink) % window;
    holder_[own] = -1;  // the query's own K/V takes its slot
    std::vector<int32_t> out;
    for (int32_t s = 0; s < std::min(p_.n_sink, t); ++s) {
      if (written_[s]) out.push_back(s);
    }
    if (t < p_.n_sink) out.push_back(t);
    std::vector<int32_t> lags;  // t's window lags, oldest first
    if (t >= p_.n_sink) {
      const int32_t reach = std::min(t - p_.n_sink + 1, window);
      for (int32_t lag = 0; lag < reach; ++lag) {
        if (!skips_.contains(lag)) lags.push_back(lag);
      }
      if (diagonal_ && static_cast<int32_t>(lags.size()) > p_.n_att - p_.n_sink) lags.resize(p_.n_att - p_.n_sink);
      std::reverse(lags.begin(), lags.end());
    }
    const bool selects = diagonal_ && t >= p_.n_sink &&
                         static_cast<int32_t>(skips_.size()) < window - (p_.n_att - p_.n_sink) &&
                         static_cast<int32_t>(lags.size()) == p_.n_att - p_.n_sink;
    const size_t first_window = out.size();
    for (int32_t lag : lags) {
      const int32_t pos = t - lag;
      const int32_t slot = p_.n_sink + (pos - p_.n_sink) % window;
      if (lag == 0 || holder_[slot] == pos) out.push_back(pos);
    }
    if (selects && out.size() > first_window) {
      size_t best = first_window;
      for (size_t i = first_window + 1; i < out.size(); ++i) {
        if (Weight(query_number, static_cast<int32_t>(i)) < Weight(query_number, static_cast<int32_t>(best))) best = i;
      }
      skips_.insert(t - out[best]);
    }
    if (writes) {
      holder_[own] = t;
      written_[t] = 1;
    }
    return out;
  }

 private:
  ResolvedPolicy p_;
  std::vector<int32_t> holder_;  // per slot class: the position whose key is there
  std::vector<uint8_t> written_;
  std::set<int32_t> skips_;
  bool diagonal_;
};

// The policy code for one (row, layer, kv head), with a shadow map of slot -> position.
class Planned {
 public:
  explicit Planned(const ResolvedPolicy& p)
      : p_(p),
        l_(LayoutFor(p)),
        ints_(l_.ints_per_head),
        floats_(l_.floats_per_head + 1),
        list_(l_.max_attended),
        shadow_(l_.n_slots, -1),
        written_(p.l_dec, 0) {
    InitState(p_, l_, State());
  }
  PolicyState State() { return {ints_.data(), floats_.data()}; }

  // in_order as the step checks decide it (the step's queries consecutive from
  // the lowest unwritten index, none provisional, nothing written beyond).
  std::vector<int32_t> Query(int32_t t, bool writes, bool in_order, int32_t query_number) {
    int32_t slot = -1;
    const bool sequential = in_order && !PlannedOutOfOrder(p_, State());
    const int32_t n = PlanQuery(p_, l_, State(), t, in_order, writes, &slot, list_.data());
    EXPECT_GE(n, 0) << "t " << t;
    EXPECT_LE(n, l_.max_attended) << "t " << t;
    EXPECT_TRUE(slot >= 0 && slot < l_.n_slots) << "t " << t;
    if (n < 0) return {};
    shadow_[slot] = t;  // the query's own K/V (written or scratch)
    std::vector<int32_t> pos;
    for (int32_t i = 0; i < n; ++i) pos.push_back(shadow_[list_[i]]);
    if (ObserveNeeded(p_, l_, State(), t)) {
      std::vector<float> probs(n);
      for (int32_t i = 0; i < n; ++i) probs[i] = Weight(query_number, i);
      ObserveStep(p_, l_, State(), t, list_.data(), probs.data(), n);
    }
    if (!writes) shadow_[slot] = -1;
    if (writes) written_[t] = 1;
    // PlanStep lists the ring in slot order (the sequential contract); diagonal's are ascending either way.
    if (sequential) std::sort(pos.begin(), pos.end());
    return pos;
  }
  bool Written(int32_t t) const { return written_[t] != 0; }

 private:
  ResolvedPolicy p_;
  PolicyLayout l_;
  std::vector<int32_t> ints_;
  std::vector<float> floats_;
  std::vector<int32_t> list_;
  std::vector<int32_t> shadow_;
  std::vector<uint8_t> written_;
};

ResolvedPolicy Resolve(PolicyKind kind, double sparsity, GridGeometry grid, int32_t n_recent = 0) {
  PolicyParams params;
  params.kind = kind;
  params.sparsity = sparsity;
  params.n_recent = n_recent;
  absl::StatusOr<ResolvedPolicy> p = ResolvePolicy(params, grid);
  EXPECT_TRUE(p.ok()) << p.status();
  return *p;
}

// Runs a ZipAR schedule through both sides; returns the queries checked.
int32_t RunSchedule(const ResolvedPolicy& p, int32_t period, int32_t window, const std::vector<int32_t>& forced) {
  Reference want(p);
  Planned got(p);
  model::ParallelSchedule schedule(p.l_dec, period, window, forced);
  schedule.Made(0);
  int32_t query_number = 0, next = 0, steps = 0;
  while (!schedule.done() && steps++ < 10 * p.l_dec) {
    const std::vector<model::ParallelSchedule::Query>& qs = schedule.Next();
    while (next < p.l_dec && got.Written(next)) ++next;
    bool in_order = true;
    for (int32_t t = next; t < p.l_dec; ++t) in_order = in_order && !got.Written(t);
    for (size_t j = 0; j < qs.size(); ++j) {
      in_order = in_order && qs[j].index == next + static_cast<int32_t>(j) && !qs[j].provisional;
    }
    for (const model::ParallelSchedule::Query& q : qs) {
      const std::vector<int32_t> expected = want.Query(q.index, !q.provisional, query_number);
      const std::vector<int32_t> actual = got.Query(q.index, !q.provisional, in_order, query_number);
      EXPECT_EQ(actual, expected) << PolicyName(p.kind) << " window " << window << " query " << query_number << " at t "
                                  << q.index << (q.provisional ? " (provisional)" : "");
      if (actual != expected) return query_number;
      ++query_number;
    }
    schedule.Commit();
  }
  EXPECT_TRUE(schedule.done());
  // The runs exercise what they claim: rows in flight (below a whole row) put
  // the state out of order, and diagonal's skip set fills (at window 1, 23
  // rows in flight evict most of a 64-slot ring: some queries then attend no
  // decode key and select nothing, so it need not fill).
  const bool rows_in_flight = window < period - 1 || (window < period && !forced.empty());
  if (p.kind != PolicyKind::kDense) EXPECT_EQ(PlannedOutOfOrder(p, got.State()), rows_in_flight) << "window " << window;
  if (p.kind == PolicyKind::kDiagonal || p.kind == PolicyKind::kDiagonalSink4) {
    if (window > 1) {
      EXPECT_EQ(SkipCount(got.State()), LayoutFor(p).skip_capacity) << PolicyName(p.kind) << " window " << window;
    } else {
      EXPECT_EQ(SkipCount(got.State()) > 0, LayoutFor(p).skip_capacity > 0);
    }
  }
  return query_number;
}

TEST(OutOfOrderPolicyTest, JanusGridSchedulesEqualTheReference) {
  const GridGeometry grid{24, 0, 576};
  const std::vector<ResolvedPolicy> policies = {
      Resolve(PolicyKind::kDense, 0.0, grid),          Resolve(PolicyKind::kDiagonal, 0.9, grid),
      Resolve(PolicyKind::kDiagonal, 0.95, grid, 64),  Resolve(PolicyKind::kDiagonal, 0.0, grid),
      Resolve(PolicyKind::kDiagonalSink4, 0.9, grid),  Resolve(PolicyKind::kStreamingLlm, 0.9, grid),
      Resolve(PolicyKind::kSlidingWindow, 0.95, grid),
  };
  for (const ResolvedPolicy& p : policies) {
    for (int32_t window : {1, 4, 8, 24}) {
      // Every query of the schedule: one per token but the last, plus the provisional ones.
      EXPECT_GE(RunSchedule(p, 24, window, {}), p.l_dec - 1) << PolicyName(p.kind) << " window " << window;
    }
  }
}

TEST(OutOfOrderPolicyTest, RowBreakGridSchedulesEqualTheReference) {
  // Lumina-mGPT's layout: rows of 8 codes and a forced row break.
  const GridGeometry grid{8, 1, 8 * 9 - 1};
  std::vector<int32_t> forced(grid.l_dec, -1);
  for (int32_t t = 8; t < grid.l_dec; t += 9) forced[t] = 1;
  for (PolicyKind kind : {PolicyKind::kDiagonal, PolicyKind::kDiagonalSink4, PolicyKind::kStreamingLlm}) {
    const ResolvedPolicy p = Resolve(kind, 0.75, grid);
    for (int32_t window : {1, 3}) EXPECT_GE(RunSchedule(p, 9, window, forced), grid.l_dec - 1);
  }
}

TEST(OutOfOrderPolicyTest, PlannedOutOfOrderInOrderAttendsPlanStepsKeys) {
  const GridGeometry grid{24, 0, 576};
  for (const ResolvedPolicy& p :
       {Resolve(PolicyKind::kDiagonal, 0.9, grid), Resolve(PolicyKind::kDiagonalSink4, 0.95, grid),
        Resolve(PolicyKind::kStreamingLlm, 0.9, grid)}) {
    Planned out_of_order(p);
    const PolicyLayout l = LayoutFor(p);
    std::vector<int32_t> ints(l.ints_per_head), list(l.max_attended), shadow(l.n_slots, -1);
    std::vector<float> floats(l.floats_per_head + 1);
    const PolicyState s{ints.data(), floats.data()};
    InitState(p, l, s);
    for (int32_t t = 0; t < p.l_dec; ++t) {
      int32_t slot = -1;
      const int32_t n = PlanStep(p, l, s, t, &slot, list.data());
      ASSERT_GE(n, 0);
      shadow[slot] = t;
      std::vector<int32_t> want;
      for (int32_t i = 0; i < n; ++i) want.push_back(shadow[list[i]]);
      std::sort(want.begin(), want.end());
      if (ObserveNeeded(p, l, s, t)) {
        // The same weights by position as the out-of-order list (ascending positions) gets.
        std::vector<float> probs(n);
        for (int32_t i = 0; i < n; ++i) {
          probs[i] =
              Weight(t, static_cast<int32_t>(std::find(want.begin(), want.end(), shadow[list[i]]) - want.begin()));
        }
        ObserveStep(p, l, s, t, list.data(), probs.data(), n);
      }
      EXPECT_EQ(out_of_order.Query(t, true, /*in_order=*/false, t), want) << PolicyName(p.kind) << " t " << t;
    }
  }
}

TEST(OutOfOrderPolicyTest, OnlyThePoliciesWithADefinitionPlanOutOfOrder) {
  const GridGeometry grid{24, 0, 576};
  for (PolicyKind kind : {PolicyKind::kDense, PolicyKind::kSlidingWindow, PolicyKind::kStreamingLlm,
                          PolicyKind::kDiagonal, PolicyKind::kDiagonalSink4}) {
    EXPECT_TRUE(PlansOutOfOrder(Resolve(kind, kind == PolicyKind::kDense ? 0.0 : 0.9, grid))) << PolicyName(kind);
  }
  for (PolicyKind kind : {PolicyKind::kH2O, PolicyKind::kTova, PolicyKind::kAlisa, PolicyKind::kGridWindow,
                          PolicyKind::kDiagonalGrid, PolicyKind::kLineEvict}) {
    const ResolvedPolicy p = Resolve(kind, 0.8, grid);
    EXPECT_FALSE(PlansOutOfOrder(p)) << PolicyName(kind);
    const PolicyLayout l = LayoutFor(p);
    std::vector<int32_t> ints(l.ints_per_head), list(l.max_attended + 1);
    std::vector<float> floats(l.floats_per_head + 1);
    InitState(p, l, {ints.data(), floats.data()});
    int32_t slot = -1;
    EXPECT_EQ(PlanOutOfOrderQuery(p, l, {ints.data(), floats.data()}, 5, true, &slot, list.data()), -1);
  }
}

}  // namespace
}  // namespace argen::sparse
