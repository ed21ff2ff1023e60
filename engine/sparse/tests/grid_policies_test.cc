// The grid policies (grid_window, diagonal_grid) and ssd step by step on
// small grids with controlled score patterns (as the Fig. 12 walk-through
// does for diagonal), plus their layout, validation and the ssd head file.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "engine/sparse/policy_params.h"
#include "engine/sparse/ssd_heads.h"
#include "engine/sparse/tests/policy_harness.h"
#include "gtest/gtest.h"
#include "kernels/sparse/policy.h"

namespace argen::sparse {
namespace {

using test_util::PolicyRun;
using V = std::vector<int32_t>;

V Sorted(V v) {
  std::sort(v.begin(), v.end());
  return v;
}

// Weights over the attended positions: 1 except where `w` says otherwise.
std::vector<float> ProbsOf(const V& positions, const std::map<int32_t, float>& w) {
  std::vector<float> p;
  for (int32_t pos : positions) p.push_back(w.contains(pos) ? w.at(pos) : 1.0f);
  return p;
}

// Width 6, no row breaks, 6 rows; N_att 6 with a run of 1 and bands of 3:
// per step the token left of the target, 3 columns above it and the 2 of
// those nearest its column two rows up.
TEST(GridWindowPolicy, WalkThroughOnASixWideGrid) {
  PolicyParams params;
  params.kind = PolicyKind::kGridWindow;
  params.n_att = 6;
  params.n_recent = 1;
  auto p = ResolvePolicy(params, GridGeometry{6, 0, 36});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->grid_run, 1);
  EXPECT_EQ(p->grid_band, 3);
  // The farthest lag is 12 (two rows and a column): 13 slots, not 36.
  EXPECT_EQ(p->n_slots, 13);
  EXPECT_EQ(KvBytes(*p, 10, 2, 4, 2, 8, 2), int64_t{2} * 2 * 4 * 2 * (10 + 13) * 8 * 2);
  PolicyRun run(*p);
  std::map<int32_t, V> expect = {
      {0, {0}},
      {5, {0, 1, 2, 3, 4, 5}},         // first N_att steps: everything
      {6, {1, 2, 3, 4, 5, 6}},         // target (1, 1): two rows up do not exist yet: recent window
      {11, {0, 1, 6, 7, 8, 9}},        // target (2, 0): no run, so 4 columns above and 2 two rows up
      {13, {1, 2, 7, 8, 9, 13}},       // target (2, 2): run {13}, row 1 cols 1-3, row 0 cols 1-2
      {20, {8, 9, 14, 15, 16, 20}},    // target (3, 3): run {20}, row 2 cols 2-4, row 1 cols 2-3
      {23, {12, 13, 18, 19, 20, 21}},  // target (4, 0): row 3 cols 0-3, row 2 cols 0-1
      {28, {16, 17, 21, 22, 23, 28}},  // target (4, 5): right edge, bands clamped to cols 3-5 / 4-5
      {35, {24, 25, 30, 31, 32, 33}},  // last step, target (6, 0) beyond the image: its shape still fits
  };
  for (int32_t t = 0; t < 36; ++t) {
    SCOPED_TRACE(::testing::Message() << "t=" << t);
    const V att = run.Plan(t);
    ASSERT_EQ(run.count(), std::min(t + 1, 6));
    if (expect.contains(t)) {
      EXPECT_EQ(Sorted(att), expect[t]);
    }
    EXPECT_FALSE(ObserveNeeded(*p, run.layout(), run.state(), t));  // positional: no scores needed
  }
}

// Lumina-mGPT's layout: rows of width + 1 tokens, the last a row break. The
// bands never reach the row-break column, the run may (it is the target's row).
TEST(GridWindowPolicy, RowBreakTokensAreOutsideTheBands) {
  PolicyParams params;
  params.kind = PolicyKind::kGridWindow;
  params.sparsity = 0.8;
  const GridGeometry grid{8, 1, 9 * 8};
  auto p = ResolvePolicy(params, grid);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->grid_period, 9);
  PolicyRun run(*p);
  int grid_steps = 0;
  for (int32_t t = 0; t < grid.l_dec; ++t) {
    const V att = run.Plan(t);
    const int32_t target_row = (t + 1) / 9;
    if (!policy_detail::GridWindowShapeAt(*p, t).valid) continue;
    ++grid_steps;
    for (int32_t pos : att) {
      if (pos / 9 < target_row) {
        EXPECT_LT(pos % 9, 8) << "t " << t << " attends row break " << pos;
      }
    }
  }
  EXPECT_GT(grid_steps, 40);
}

// Width 5, N_att 4 (run 1, bands of 3), N_r 7: the neighbourhood as lags is
// Lambda = 0 | 4, 5, 3 | 9, 10, 8; the initial set Lambda[0, 4) = {0, 3, 4, 5}
// is complete at t = 5; before that the recent window. Each selection skips
// the argmin and brings in the next lag, once that one exists at t + 1.
TEST(DiagonalGridPolicy, WalkThroughOnAFiveWideGrid) {
  PolicyParams params;
  params.kind = PolicyKind::kDiagonalGrid;
  params.n_att = 4;
  params.n_recent = 7;
  auto p = ResolvePolicy(params, GridGeometry{5, 0, 25});
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->grid_run, 1);
  EXPECT_EQ(p->grid_band, 3);
  EXPECT_EQ(p->n_slots, 11);  // the farthest lag of the window is 10
  PolicyRun run(*p);
  struct Expect {
    V attended;
    int32_t low;      // position given the lowest weight (-1: uniform)
    bool select;      // ObserveNeeded
    V skipped_after;  // skip lags after observing step t
  };
  const std::map<int32_t, Expect> steps = {
      {0, {{0}, -1, false, {}}},
      {3, {{0, 1, 2, 3}, -1, false, {}}},
      {4, {{1, 2, 3, 4}, -1, false, {}}},
      {5, {{0, 1, 2, 5}, -1, false, {}}},         // grid phase: lags 0, 3, 4, 5
      {7, {{2, 3, 4, 7}, -1, false, {}}},         // lag 9 does not exist at t = 8 yet
      {8, {{3, 4, 5, 8}, 4, true, {4}}},          // skips lag 4, lag 9 replaces it
      {9, {{0, 4, 6, 9}, 9, true, {4, 0}}},       // skips lag 0 (the new token), lag 10 joins
      {10, {{0, 1, 5, 7}, 0, true, {4, 0, 10}}},  // skips lag 10, lag 8 joins: the window is used up
      {11, {{2, 3, 6, 8}, 2, false, {4, 0, 10}}},
      {20, {{11, 12, 15, 17}, -1, false, {4, 0, 10}}},
  };
  for (int32_t t = 0; t < 25; ++t) {
    SCOPED_TRACE(::testing::Message() << "t=" << t);
    int32_t evicted = -2;
    const V att = run.Plan(t, &evicted);
    ASSERT_EQ(run.count(), std::min(t + 1, 4));
    EXPECT_EQ(evicted, t < 11 ? -1 : t - 11);
    int32_t low = -1;
    if (steps.contains(t)) {
      const Expect& e = steps.at(t);
      EXPECT_EQ(Sorted(att), e.attended);
      EXPECT_EQ(ObserveNeeded(*p, run.layout(), run.state(), t), e.select);
      low = e.low;
    }
    run.Observe(t, ProbsOf(att, {{low, 0.1f}}));
    if (steps.contains(t)) {
      EXPECT_EQ(run.SkipLags(), steps.at(t).skipped_after);
    }
  }
}

// Width 7, 3 rows (L_dec 21), N_att 5: spatial heads keep the anchor (the
// first decode token) and the last W = 4; semantic heads M(t) + 1 keys, M(t) =
// floor(t (20 + 2t) / 200) (0 until t = 6, 1 from 7, 2 from 10, 3 from 14,
// then the cap 4 from 16), evicting the lowest accumulated score, keys of the
// edge columns 0 and 6 (positions 0, 6, 7, 13, 14, 20) last.
TEST(SsdPolicy, WalkThroughSpatialAndSemanticHeads) {
  PolicyParams params;
  params.kind = PolicyKind::kSsd;
  params.n_att = 5;
  HeadClasses classes{1, 2, {1, 0}};
  auto p = ResolvePolicy(params, GridGeometry{7, 0, 21}, &classes);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->n_sink, 1);
  EXPECT_EQ(p->n_recent, 4);
  EXPECT_EQ(p->n_slots, 5);
  EXPECT_TRUE(SsdHeadIsSemantic(*p, 0));
  EXPECT_FALSE(SsdHeadIsSemantic(*p, 1));
  EXPECT_FALSE(SsdHeadIsSemantic(*p, 2));  // outside the classification: spatial

  PolicyRun spatial(*p, 1);
  for (int32_t t = 0; t < 21; ++t) {
    const V att = spatial.Plan(t);
    V want = {0};
    for (int32_t pos = std::max(1, t - 3); pos <= t; ++pos) want.push_back(pos);
    if (t == 0) want = {0};
    EXPECT_EQ(Sorted(att), want) << "t " << t;
    EXPECT_FALSE(ObserveNeeded(*p, spatial.layout(), spatial.state(), t));
  }

  PolicyRun semantic(*p, 0);
  const std::vector<int32_t> counts = {1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 3, 3, 3, 3, 4, 4, 5, 5, 5, 5, 5};
  // Weights of step t: 1 except these.
  std::map<int32_t, std::map<int32_t, float>> weights = {
      {7, {{7, 0.1f}}},             // 6 (edge, 2.0) outscores 7 (edge, 0.1): 7 goes at t = 8
      {8, {{6, 0.01f}, {8, 5.f}}},  // 8 (non-edge, 5.0) outscores 6 (2.01) yet goes at t = 9
      {10, {{10, 0.2f}}},           // 10 (0.2) below 9 (2.0): 10 goes at t = 11
  };
  const std::map<int32_t, V> expect = {
      {1, {1}}, {6, {6}}, {7, {6, 7}}, {8, {6, 8}}, {9, {6, 9}}, {10, {6, 9, 10}}, {11, {6, 9, 11}},
  };
  for (int32_t t = 0; t < 21; ++t) {
    SCOPED_TRACE(::testing::Message() << "t=" << t);
    const V att = semantic.Plan(t);
    ASSERT_EQ(semantic.count(), counts[t]);
    EXPECT_EQ(AttendedCount(*p, true, t), counts[t]);
    EXPECT_NE(std::find(att.begin(), att.end(), t), att.end());  // the new token
    if (expect.contains(t)) {
      EXPECT_EQ(Sorted(att), expect.at(t));
    }
    EXPECT_TRUE(ObserveNeeded(*p, semantic.layout(), semantic.state(), t));
    semantic.Observe(t, ProbsOf(att, weights[t]));
  }
}

// ssd's keep schedule on the Janus grid: 10% of the decoded tokens at the
// start, 30% at the end, never more than N_att - 1, never more than +1 a step.
TEST(SsdPolicy, KeepGrowsFromTenToThirtyPercent) {
  PolicyParams params;
  params.kind = PolicyKind::kSsd;
  params.n_att = 576;
  auto p = ResolvePolicy(params, 576);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(policy_detail::SsdKeep(*p, 100), 100 * (575 + 200) / 5750);  // 13: about 0.13 t
  EXPECT_EQ(policy_detail::SsdKeep(*p, 575), 172);                       // 0.3 x 575 = 172.5
  for (int32_t t = 1; t < 576; ++t) {
    const int32_t d = policy_detail::SsdKeep(*p, t) - policy_detail::SsdKeep(*p, t - 1);
    ASSERT_TRUE(d == 0 || d == 1) << t;
  }
  params.n_att = 29;  // 95%
  auto q = ResolvePolicy(params, 576);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(policy_detail::SsdKeep(*q, 575), 28);
  // Mean keys per step: all spatial (unclassified) attends the window.
  EXPECT_NEAR(MeanAttendedKeys(*q), (576 * 29 - 28 * 29 / 2.0) / 576, 1e-9);
  HeadClasses all_semantic{2, 2, {1, 1, 1, 1}};
  auto r = ResolvePolicy(params, GridGeometry{24, 0, 576}, &all_semantic);
  ASSERT_TRUE(r.ok());
  double sum = 0;
  for (int32_t t = 0; t < 576; ++t) sum += std::min(t, policy_detail::SsdKeep(*r, t)) + 1;
  EXPECT_NEAR(MeanAttendedKeys(*r), sum / 576, 1e-9);
  EXPECT_LT(MeanAttendedKeys(*r), MeanAttendedKeys(*q));
}

// PlanStepState + AttendedSlot write PlanStep's list; the split observe
// (ArgminFrom + ApplyDiagonalSelection, what the CUDA backend runs) equals
// ObserveStep for diagonal_grid, ties included.
TEST(GridPolicies, SplitPlanAndFusedArgminEqualTheHostSteps) {
  const HeadClasses classes{1, 2, {1, 0}};
  for (PolicyKind kind : {PolicyKind::kGridWindow, PolicyKind::kDiagonalGrid, PolicyKind::kSsd})
    for (double sparsity : {0.6, 0.8, 0.95}) {
      PolicyParams params;
      params.kind = kind;
      params.sparsity = sparsity;
      auto p = ResolvePolicy(params, GridGeometry{12, 1, 13 * 12}, &classes);
      ASSERT_TRUE(p.ok()) << p.status();
      for (int32_t head : {0, 1}) {
        PolicyRun a(*p, head), b(*p, head);
        uint32_t seed = 17;
        int selections = 0;
        for (int32_t t = 0; t < p->l_dec; ++t) {
          a.Plan(t);
          b.Plan(t);
          ASSERT_EQ(a.count(), b.count());
          const int32_t n = a.count();
          for (int32_t i = 0; i < n; ++i)
            ASSERT_EQ(AttendedSlot(*p, a.layout(), a.state(), t, i), a.attended_slots()[i]) << "t " << t;
          std::vector<float> probs(n);
          for (auto& x : probs) {  // few distinct values: many exact ties
            seed = seed * 1664525u + 1013904223u;
            x = 0.125f * static_cast<float>((seed >> 24) % 4 + 1);
          }
          const bool needed = ObserveNeeded(*p, a.layout(), a.state(), t);
          a.Observe(t, probs);
          if (SelectsByArgmin(kind)) {
            if (needed) {
              ++selections;
              EXPECT_EQ(n - a.state().ints[kStateLagCount], DiagonalSelectionFirst(*p));
            }
            ApplyDiagonalSelection(*p, b.layout(), b.state(), t, n,
                                   ArgminFrom(probs.data(), DiagonalSelectionFirst(*p), n));
          } else {
            b.Observe(t, probs);
          }
          for (int32_t i = 0; i < b.layout().ints_per_head; ++i)
            ASSERT_EQ(a.state().ints[i], b.state().ints[i]) << "t " << t << " int " << i;
        }
        if (kind == PolicyKind::kDiagonalGrid) {
          EXPECT_GT(selections, 0);
        }
      }
    }
}

TEST(GridPolicies, InvalidParametersAreRejectedNamingTheField) {
  struct Case {
    PolicyKind kind;
    GridGeometry grid;
    int32_t n_att, n_recent, n_sink;
    const char* field;
  };
  const GridGeometry janus{24, 0, 576};
  const Case cases[] = {
      {PolicyKind::kGridWindow, GridGeometry{0, 0, 575}, 20, 0, -1, "grid width"},
      {PolicyKind::kDiagonalGrid, GridGeometry{0, 0, 96}, 20, 0, -1, "grid width"},
      {PolicyKind::kSsd, GridGeometry{0, 0, 96}, 20, 0, -1, "grid width"},
      {PolicyKind::kGridWindow, GridGeometry{24, -1, 576}, 20, 0, -1, "row_break_tokens"},
      {PolicyKind::kGridWindow, janus, 20, 12, -1, "n_recent"},  // bands of 25 > 24 columns
      {PolicyKind::kGridWindow, janus, 20, 0, 20, "n_sink"},
      {PolicyKind::kDiagonalGrid, janus, 30, 29, -1, "n_att"},  // n_att > n_recent
      {PolicyKind::kDiagonalGrid, janus, 30, 577, -1, "n_recent"},
      {PolicyKind::kDiagonalGrid, janus, 4, 4, 4, "n_sink"},
      {PolicyKind::kSsd, janus, 29, 29, -1, "n_recent"},  // W > n_att - n_sink
      {PolicyKind::kSsd, janus, 1, 0, -1, "n_sink"},      // the anchor leaves no key
      {PolicyKind::kGridWindow, janus, 577, 0, -1, "n_att"},
  };
  for (const Case& c : cases) {
    PolicyParams params;
    params.kind = c.kind;
    params.n_att = c.n_att;
    params.n_recent = c.n_recent;
    params.n_sink = c.n_sink;
    auto p = ResolvePolicy(params, c.grid);
    ASSERT_FALSE(p.ok()) << PolicyName(c.kind) << " " << c.field;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(p.status().message()).find(c.field), std::string::npos) << p.status();
    EXPECT_NE(std::string(p.status().message()).find(PolicyName(c.kind)), std::string::npos) << p.status();
  }
  // A classification of the wrong shape or too many heads.
  PolicyParams params;
  params.kind = PolicyKind::kSsd;
  params.sparsity = 0.9;
  const HeadClasses short_list{2, 2, {1, 0, 1}};
  const HeadClasses too_many{2, kMaxClassifiedHeads, std::vector<uint8_t>(2 * kMaxClassifiedHeads, 0)};
  for (const HeadClasses* c : {&short_list, &too_many}) {
    auto p = ResolvePolicy(params, janus, c);
    ASSERT_FALSE(p.ok());
    EXPECT_NE(std::string(p.status().message()).find("head classification"), std::string::npos) << p.status();
  }
  // Without a classification ssd validates but is unclassified (the engine refuses it).
  auto unclassified = ResolvePolicy(params, janus);
  ASSERT_TRUE(unclassified.ok());
  EXPECT_EQ(unclassified->ssd_heads, 0);
}

TEST(GridPolicies, NamesParametersAndDefaults) {
  for (const char* name : {"grid_window", "diagonal_grid", "ssd"}) {
    auto k = ParsePolicyName(name);
    ASSERT_TRUE(k.ok()) << name;
    EXPECT_EQ(PolicyName(*k), name);
    EXPECT_EQ(PolicyParameterNames(*k), (std::vector<std::string_view>{"sparsity", "n_att", "n_recent", "n_sink"}));
  }
  EXPECT_TRUE(PolicyParameterNames(PolicyKind::kDense).empty());
  EXPECT_EQ(PolicyParameterNames(PolicyKind::kTova), (std::vector<std::string_view>{"sparsity", "n_att"}));
  EXPECT_NE(std::string(ParsePolicyName("nope").status().message()).find("ssd"), std::string::npos);
  // Janus-Pro's 24 x 24 grid at 95%: N_att 29 = run 4 + bands of 9.
  PolicyParams params;
  params.kind = PolicyKind::kGridWindow;
  params.sparsity = 0.95;
  auto p = ResolvePolicy(params, 576);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->n_att, 29);
  EXPECT_EQ(p->n_sink, 0);
  EXPECT_EQ(p->grid_width, 24);
  EXPECT_EQ(p->grid_run, 4);
  EXPECT_EQ(p->grid_band, 9);
  // The farthest lag: 3 rows up at the right edge (t - position = 72 + 23 - 17 - 1):
  // 78 slots, 13.5% of dense's 576.
  EXPECT_EQ(p->n_slots, 78);
  params.kind = PolicyKind::kDiagonalGrid;
  auto d = ResolvePolicy(params, 576);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->n_recent, 29 + 2 * 9);  // the initial set and two more band rows
  EXPECT_EQ(SquareGrid(576).width, 24);
  EXPECT_EQ(SquareGrid(575).width, 0);
}

TEST(SsdHeads, FileRoundTripAndErrors) {
  HeadClasses c = ClassifyHeads(2, 3, {0.1, 0.45, 0.9, 0.44, std::nan(""), 0.5}, 0.45);
  EXPECT_EQ(c.semantic, (std::vector<uint8_t>{0, 1, 1, 0, 0, 1}));
  HeadClassesProvenance prov;
  prov.model = "m";
  prov.score = "s_decode";
  prov.window = 32;
  prov.threshold = 0.45;
  const std::string text = HeadClassesJson(c, {0.1, 0.45, 0.9, 0.44, std::nan(""), 0.5}, prov);
  absl::StatusOr<HeadClasses> back = ParseHeadClasses(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->layers, 2);
  EXPECT_EQ(back->kv_heads, 3);
  EXPECT_EQ(back->semantic, c.semantic);
  struct Bad {
    const char* json;
    const char* field;
  };
  const Bad bad[] = {
      {"[1]", "JSON object"},
      {R"({"layers": 1, "kv_heads": 2})", "semantic"},
      {R"({"layers": 0, "kv_heads": 2, "semantic": []})", "layers"},
      {R"({"layers": 1, "kv_heads": 2, "semantic": [[0]]})", "semantic[0]"},
      {R"({"layers": 1, "kv_heads": 2, "semantic": [[0, 2]]})", "semantic[0][1]"},
      {R"({"format": "v0", "layers": 1, "kv_heads": 1, "semantic": [[0]]})", "format"},
      {R"({"layers": 64, "kv_heads": 64, "semantic": []})", "layers x kv_heads"},
  };
  for (const Bad& b : bad) {
    absl::StatusOr<HeadClasses> r = ParseHeadClasses(b.json);
    ASSERT_FALSE(r.ok()) << b.json;
    EXPECT_NE(std::string(r.status().message()).find(b.field), std::string::npos) << r.status();
  }
  EXPECT_EQ(LoadHeadClasses("/nonexistent/ssd_heads.json").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace argen::sparse
