// Every policy, many parameters, every step: the bounds hold and the attended
// set equals an independent reference implementation (policy_reference.h).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <set>
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

constexpr PolicyKind kAllKinds[] = {
    PolicyKind::kDense,      PolicyKind::kSlidingWindow, PolicyKind::kStreamingLlm, PolicyKind::kH2O,
    PolicyKind::kTova,       PolicyKind::kAlisa,         PolicyKind::kDiagonal,     PolicyKind::kDiagonalSink4,
    PolicyKind::kGridWindow, PolicyKind::kDiagonalGrid,  PolicyKind::kSsd,          PolicyKind::kLineEvict,
};

// A deterministic pseudo-random attention weight for (step, position), so two
// implementations listing keys in different orders see the same weights.
float Weight(uint64_t seed, int32_t t, int32_t pos) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + static_cast<uint64_t>(t) * 0xBF58476D1CE4E5B9ull +
               static_cast<uint64_t>(pos) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  x *= 0xD6E8FEB86659FD93ull;
  x ^= x >> 32;
  return static_cast<float>((x >> 40) + 1) / static_cast<float>(1ull << 24);
}

std::vector<float> Weights(uint64_t seed, int32_t t, const std::vector<int32_t>& positions) {
  std::vector<float> w;
  for (int32_t pos : positions) w.push_back(Weight(seed, t, pos));
  return w;
}

std::vector<int32_t> Sorted(std::vector<int32_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// Runs l_dec steps; checks the bounds and invariants at each step and returns
// the attended position sets.
std::vector<std::vector<int32_t>> RunAndCheck(const ResolvedPolicy& p, uint64_t seed, bool compare_reference = true,
                                              int32_t head_index = -1) {
  PolicyRun run(p, head_index);
  const bool semantic = SsdHeadIsSemantic(p, head_index);
  ReferencePolicy ref(p, semantic);
  const PolicyLayout& l = run.layout();
  EXPECT_EQ(l.n_slots, p.n_slots);
  EXPECT_EQ(l.max_attended, p.n_att);
  std::vector<std::vector<int32_t>> all;
  std::set<int32_t> slots_used;
  for (int32_t t = 0; t < p.l_dec; ++t) {
    SCOPED_TRACE(::testing::Message() << PolicyName(p.kind) << " n_att=" << p.n_att << " n_slots=" << p.n_slots
                                      << " n_recent=" << p.n_recent << " n_sink=" << p.n_sink << " t=" << t);
    const std::vector<int32_t> att = run.Plan(t);
    const int32_t n = run.count();
    // Attended count: exactly min(t + 1, n_att) for every policy but ssd's
    // semantic heads and line_evict (AttendedCount: the exact per-step cost).
    EXPECT_EQ(n, AttendedCount(p, semantic, t));
    if (!semantic && p.kind != PolicyKind::kLineEvict) {
      EXPECT_EQ(n, std::min(t + 1, p.kind == PolicyKind::kSsd ? p.n_sink + p.n_recent : p.n_att));
    }
    EXPECT_LE(n, l.max_attended);
    // Write slot and attended slots inside the bound, no duplicates.
    EXPECT_GE(run.write_slot(), 0);
    EXPECT_LT(run.write_slot(), l.n_slots);
    slots_used.insert(run.write_slot());
    std::set<int32_t> distinct_slots(run.attended_slots().begin(), run.attended_slots().begin() + n);
    EXPECT_EQ(static_cast<int32_t>(distinct_slots.size()), n);
    for (int32_t s : distinct_slots) {
      EXPECT_GE(s, 0);
      EXPECT_LT(s, l.n_slots);
    }
    // Attended keys hold real past positions; the state's slot map agrees
    // with what the backend wrote.
    for (int32_t pos : att) {
      EXPECT_GE(pos, 0);
      EXPECT_LE(pos, t);
    }
    // (line_evict frees the slots it evicts: -1 until a new key takes them.)
    for (int32_t s = 0; s < l.n_slots; ++s) {
      const int32_t held = SlotPosition(l, run.state(), s);
      if (p.kind == PolicyKind::kLineEvict && held == -1) continue;
      EXPECT_EQ(held, run.shadow()[s]);
    }
    if (p.kind != PolicyKind::kDiagonal && p.kind != PolicyKind::kDiagonalSink4 &&
        p.kind != PolicyKind::kDiagonalGrid && p.kind != PolicyKind::kGridWindow) {
      EXPECT_NE(std::find(att.begin(), att.end(), t), att.end()) << "new token not attended";
    }
    if (compare_reference) {
      const std::vector<int32_t> ref_att = ref.Plan(t);
      EXPECT_EQ(Sorted(att), ref_att);
      ref.Observe(t, Weights(seed, t, ref_att));
    }
    run.Observe(t, Weights(seed, t, att));
    all.push_back(Sorted(att));
    if (::testing::Test::HasFailure()) break;
  }
  EXPECT_LE(static_cast<int32_t>(slots_used.size()), p.n_slots);
  return all;
}

// Why ResolvePolicy must refuse `kind` at `l_dec` and `sparsity` with the
// other fields at their defaults (a piece of its message), or "" when it must
// accept it: no decode key left, the default sinks (4; ssd 1; the grid
// policies 0) leaving no recent slot, or a grid policy on a decode length that
// is no square grid.
std::string ExpectedRefusal(PolicyKind kind, int32_t l_dec, double sparsity) {
  const int32_t n_att = static_cast<int32_t>(std::lround((1.0 - sparsity) * l_dec));
  if (n_att < 1) return "leaves no decode key";
  const bool grid = kind == PolicyKind::kGridWindow || kind == PolicyKind::kDiagonalGrid;
  const bool line = kind == PolicyKind::kLineEvict;
  int32_t sinks = -1;  // no sinks
  if (kind == PolicyKind::kStreamingLlm || kind == PolicyKind::kDiagonalSink4) sinks = 4;
  if (kind == PolicyKind::kSsd) sinks = 1;
  if (grid || line) sinks = 0;
  if (sinks >= n_att) return "at least one recent slot is needed";
  const int32_t width = static_cast<int32_t>(std::lround(std::sqrt(static_cast<double>(l_dec))));
  if ((grid || line || kind == PolicyKind::kSsd) && width * width != l_dec) return "is not a square grid";
  // line_evict: a line, a recent key and one scored key, unless it never evicts.
  if (line && n_att < width + 2 && n_att < l_dec) return "the budget must be >= one line";
  return "";
}

// The cases of AllPoliciesMatchReferenceAndStayInBounds that run (of 468:
// the others are refused, each for its ExpectedRefusal reason).
constexpr int32_t kExpectedRuns = 245 + 16;  // line_evict: 16

TEST(PolicyReference, AllPoliciesMatchReferenceAndStayInBounds) {
  const int32_t l_decs[] = {1, 2, 5, 9, 64, 576};
  const double sparsities[] = {0.0, 0.3, 0.5, 0.8, 0.9, 0.95, 0.96};
  uint64_t seed = 1;
  // Every configured case either runs or is refused for the reason expected
  // of it; none is skipped silently, and every policy runs.
  int32_t configured = 0, refused = 0, ran = 0;
  std::map<PolicyKind, int32_t> ran_of;
  for (PolicyKind kind : kAllKinds) {
    for (int32_t l_dec : l_decs) {
      for (double s : sparsities) {
        if (kind == PolicyKind::kDense && s > 0) continue;  // dense has no sparsity: not a case
        ++configured;
        SCOPED_TRACE(::testing::Message() << PolicyName(kind) << " l_dec=" << l_dec << " sparsity=" << s);
        PolicyParams params;
        params.kind = kind;
        params.sparsity = s;
        auto p = ResolvePolicy(params, l_dec);
        const std::string refusal = ExpectedRefusal(kind, l_dec, s);
        if (!refusal.empty()) {
          ASSERT_FALSE(p.ok()) << "accepted; expected refused: " << refusal;
          EXPECT_NE(p.status().message().find(refusal), std::string::npos) << p.status();
          ++refused;
          continue;
        }
        ASSERT_TRUE(p.ok()) << p.status();
        RunAndCheck(*p, ++seed);
        ++ran;
        ++ran_of[kind];
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
  EXPECT_EQ(ran + refused, configured);
  EXPECT_EQ(configured, 11 * 6 * 7 + 6);  // dense at sparsity 0 only
  EXPECT_EQ(ran, kExpectedRuns);
  for (PolicyKind kind : kAllKinds) EXPECT_GT(ran_of[kind], 0) << PolicyName(kind) << " never ran";
}

TEST(PolicyReference, ExplicitWindowsAndSinks) {
  struct Case {
    PolicyKind kind;
    int32_t l_dec, n_att, n_recent, n_sink;
  };
  const Case cases[] = {
      {PolicyKind::kDiagonal, 40, 4, 7, -1},
      {PolicyKind::kDiagonal, 100, 10, 60, -1},
      {PolicyKind::kDiagonal, 100, 1, 30, -1},
      {PolicyKind::kDiagonal, 50, 20, 20, -1},
      {PolicyKind::kDiagonalSink4, 100, 10, 60, -1},
      {PolicyKind::kDiagonalSink4, 30, 6, 9, 2},
      {PolicyKind::kDiagonalSink4, 30, 6, 9, 0},
      {PolicyKind::kStreamingLlm, 50, 8, 0, 1},
      {PolicyKind::kStreamingLlm, 50, 8, 0, 0},
      {PolicyKind::kH2O, 80, 12, 1, -1},
      {PolicyKind::kH2O, 80, 12, 12, -1},
      {PolicyKind::kAlisa, 80, 12, 3, -1},
      {PolicyKind::kTova, 80, 1, 0, -1},
      {PolicyKind::kSlidingWindow, 80, 1, 0, -1},
  };
  uint64_t seed = 1000;
  for (const Case& c : cases) {
    PolicyParams params;
    params.kind = c.kind;
    params.n_att = c.n_att;
    params.n_recent = c.n_recent;
    params.n_sink = c.n_sink;
    auto p = ResolvePolicy(params, c.l_dec);
    ASSERT_TRUE(p.ok()) << p.status();
    RunAndCheck(*p, ++seed);
    if (::testing::Test::HasFailure()) return;
  }
}

TEST(PolicyReference, SparsityZeroIsDense) {
  for (int32_t l_dec : {1, 7, 96, 576}) {
    PolicyParams dense_params;
    auto dense = ResolvePolicy(dense_params, l_dec);
    ASSERT_TRUE(dense.ok());
    const auto expected = RunAndCheck(*dense, 7);
    for (PolicyKind kind : kAllKinds) {
      PolicyParams params;
      params.kind = kind;
      auto p = ResolvePolicy(params, l_dec);
      if (!p.ok()) {
        // Only sink policies can be invalid here, when L_dec <= n_sink, and
        // the grid policies where L_dec is no square grid.
        if (std::string(p.status().message()).find("grid width") == std::string::npos) {
          EXPECT_LE(l_dec, 4) << PolicyName(kind) << ": " << p.status();
        }
        continue;
      }
      EXPECT_EQ(RunAndCheck(*p, 7), expected) << PolicyName(kind) << " l_dec=" << l_dec;
    }
  }
}

TEST(PolicyReference, DiagonalWithBudgetOfTheWholeWindowIsSlidingWindow) {
  for (int32_t n_r : {1, 3, 7, 50, 288}) {
    PolicyParams diag;
    diag.kind = PolicyKind::kDiagonal;
    diag.n_att = n_r;
    diag.n_recent = n_r;
    PolicyParams window;
    window.kind = PolicyKind::kSlidingWindow;
    window.n_att = n_r;
    auto d = ResolvePolicy(diag, 576);
    auto w = ResolvePolicy(window, 576);
    ASSERT_TRUE(d.ok() && w.ok());
    EXPECT_EQ(d->n_slots, w->n_slots);
    EXPECT_EQ(RunAndCheck(*d, 3), RunAndCheck(*w, 3)) << "N_r=" << n_r;
  }
  // With sinks: diagonal_sink4 with n_att == n_recent is streaming_llm.
  PolicyParams ds;
  ds.kind = PolicyKind::kDiagonalSink4;
  ds.n_att = 23;
  ds.n_recent = 23;
  PolicyParams st;
  st.kind = PolicyKind::kStreamingLlm;
  st.n_att = 23;
  auto a = ResolvePolicy(ds, 576);
  auto b = ResolvePolicy(st, 576);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(RunAndCheck(*a, 5), RunAndCheck(*b, 5));
}

TEST(PolicyReference, DiagonalNeverAttendsOutsideTheRecentWindowOrBeyondTheSinks) {
  PolicyParams params;
  params.kind = PolicyKind::kDiagonalSink4;
  params.sparsity = 0.96;
  auto p = ResolvePolicy(params, 576);
  ASSERT_TRUE(p.ok());
  const auto sets = RunAndCheck(*p, 11);
  for (int32_t t = 0; t < static_cast<int32_t>(sets.size()); ++t) {
    for (int32_t pos : sets[t]) {
      EXPECT_TRUE(pos < 4 || pos > t - (p->n_recent - 4)) << "t=" << t << " pos=" << pos;
    }
    for (int32_t sink = 0; sink < std::min(t + 1, 4); ++sink) {
      EXPECT_TRUE(std::binary_search(sets[t].begin(), sets[t].end(), sink));
    }
  }
}

}  // namespace
}  // namespace argen::sparse

namespace argen::sparse {
namespace {

// Random parameters, valid or not: whatever ResolvePolicy accepts must keep
// every bound and match the reference; what it rejects must say which field.
TEST(PolicyReference, RandomParametersFuzz) {
  uint64_t x = 0x2545F4914F6CDD1Dull;
  auto next = [&x](int32_t n) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return static_cast<int32_t>(x % static_cast<uint64_t>(n));
  };
  int accepted = 0;
  for (int iter = 0; iter < 1500; ++iter) {
    PolicyParams params;
    params.kind = static_cast<PolicyKind>(next(8));
    const int32_t l_dec = 1 + next(120);
    switch (next(3)) {
      case 0:
        params.sparsity = next(1000) / 1000.0;
        break;
      case 1:
        params.n_att = next(l_dec + 3);
        break;
      default:
        break;
    }
    if (next(2)) params.n_recent = next(l_dec + 3);
    if (next(3) == 0) params.n_sink = next(8) - 1;
    auto p = ResolvePolicy(params, l_dec);
    if (!p.ok()) {
      EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
      const std::string msg(p.status().message());
      EXPECT_TRUE(msg.find("sparsity") != std::string::npos || msg.find("n_att") != std::string::npos ||
                  msg.find("n_recent") != std::string::npos || msg.find("n_sink") != std::string::npos)
          << msg;
      continue;
    }
    ++accepted;
    EXPECT_GE(p->n_att, 1);
    EXPECT_LE(p->n_att, l_dec);
    EXPECT_LE(p->n_slots, l_dec);
    EXPECT_GE(p->n_slots, p->n_att);
    RunAndCheck(*p, iter);
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_GT(accepted, 500);
}

}  // namespace
}  // namespace argen::sparse

namespace argen::sparse {
namespace {

GridGeometry Grid(int32_t width, int32_t row_break, int32_t rows) {
  return GridGeometry{width, row_break, (width + row_break) * rows};
}

// ssd's classification for tests: every third head semantic, and head 1.
HeadClasses TestClasses(int32_t layers, int32_t kv_heads) {
  HeadClasses c;
  c.layers = layers;
  c.kv_heads = kv_heads;
  for (int32_t h = 0; h < layers * kv_heads; ++h) c.semantic.push_back(h % 3 == 0 || h == 1 ? 1 : 0);
  return c;
}

constexpr PolicyKind kGridKinds[] = {PolicyKind::kGridWindow, PolicyKind::kDiagonalGrid, PolicyKind::kSsd};

// The grid policies and ssd on square grids, grids with row breaks
// (Lumina-mGPT's w + 1), narrow and single-column ones: every step equals the
// reference and stays in bounds; ssd for a spatial and a semantic head.
TEST(PolicyReference, GridPoliciesMatchReferenceOnManyGrids) {
  const GridGeometry grids[] = {Grid(24, 0, 24), Grid(6, 0, 6),  Grid(7, 1, 5),  Grid(5, 2, 4),
                                Grid(1, 0, 10),  Grid(12, 0, 3), Grid(3, 0, 20), Grid(16, 1, 12)};
  const double sparsities[] = {0.0, 0.5, 0.9, 0.95, 0.96};
  const HeadClasses classes = TestClasses(2, 2);
  uint64_t seed = 40;
  int runs = 0;
  for (PolicyKind kind : kGridKinds)
    for (const GridGeometry& grid : grids)
      for (double s : sparsities)
        for (int32_t n_sink : {-1, 0, 2}) {
          PolicyParams params;
          params.kind = kind;
          params.sparsity = s;
          params.n_sink = n_sink;
          auto p = ResolvePolicy(params, grid, &classes);
          if (!p.ok()) continue;  // too few keys for the sinks
          SCOPED_TRACE(::testing::Message() << "grid " << grid.width << "+" << grid.row_break_tokens << " x "
                                            << grid.l_dec << " sparsity " << s << " n_sink " << n_sink);
          for (int32_t head : {0, 2}) {  // semantic, spatial under ssd
            RunAndCheck(*p, ++seed, true, head);
            ++runs;
            if (::testing::Test::HasFailure()) return;
          }
        }
  EXPECT_GT(runs, 180);
}

// Random parameters and grids, valid or not: whatever ResolvePolicy accepts
// keeps every bound and matches the reference; what it rejects names its field.
TEST(PolicyReference, GridPoliciesRandomParametersFuzz) {
  uint64_t x = 0x9E3779B97F4A7C15ull;
  auto next = [&x](int32_t n) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return static_cast<int32_t>(x % static_cast<uint64_t>(n));
  };
  int accepted = 0;
  for (int iter = 0; iter < 900; ++iter) {
    PolicyParams params;
    params.kind = kGridKinds[next(3)];
    GridGeometry grid{next(14), next(3), 0};
    grid.l_dec = 1 + next(3 * 14 * 3);
    if (next(8) == 0) grid.row_break_tokens = -1;
    switch (next(3)) {
      case 0:
        params.sparsity = next(1000) / 1000.0;
        break;
      case 1:
        params.n_att = next(grid.l_dec + 3);
        break;
      default:
        break;
    }
    if (next(2)) params.n_recent = next(grid.l_dec + 3);
    if (next(3) == 0) params.n_sink = next(6) - 1;
    const HeadClasses classes = TestClasses(1 + next(3), 1 + next(3));
    auto p = ResolvePolicy(params, grid, next(2) ? &classes : nullptr);
    if (!p.ok()) {
      EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
      const std::string msg(p.status().message());
      EXPECT_TRUE(msg.find("sparsity") != std::string::npos || msg.find("n_att") != std::string::npos ||
                  msg.find("n_recent") != std::string::npos || msg.find("n_sink") != std::string::npos ||
                  msg.find("grid") != std::string::npos || msg.find("l_dec") != std::string::npos)
          << msg;
      continue;
    }
    ++accepted;
    EXPECT_GE(p->n_att, 1);
    EXPECT_LE(p->n_att, grid.l_dec);
    EXPECT_LE(p->n_slots, grid.l_dec);
    EXPECT_GE(p->n_slots, p->n_att);
    EXPECT_EQ(LayoutFor(*p).max_attended, p->n_att);
    RunAndCheck(*p, iter, true, next(std::max(1, p->ssd_heads + 1)) - 1);
    if (::testing::Test::HasFailure()) return;
  }
  EXPECT_GT(accepted, 300);
}

// grid_window's memory bound is exact: on a grid with enough rows some step
// attends the farthest lag the ring holds (n_slots - n_sink - 1), and none
// attends farther; n_att is reached exactly.
TEST(PolicyReference, GridWindowSlotsAreTheFarthestLagAttended) {
  for (const GridGeometry& grid : {Grid(24, 0, 24), Grid(24, 1, 24), Grid(9, 0, 30), Grid(5, 0, 40)})
    for (double s : {0.8, 0.9, 0.925, 0.95, 0.96})
      for (int32_t n_sink : {0, 3}) {
        PolicyParams params;
        params.kind = PolicyKind::kGridWindow;
        params.sparsity = s;
        params.n_sink = n_sink;
        auto p = ResolvePolicy(params, grid);
        ASSERT_TRUE(p.ok()) << p.status();
        SCOPED_TRACE(::testing::Message() << "width " << grid.width << " sparsity " << s << " n_sink " << n_sink);
        const auto sets = RunAndCheck(*p, 3);
        int32_t reach = 0, most = 0;
        for (int32_t t = 0; t < static_cast<int32_t>(sets.size()); ++t) {
          most = std::max(most, static_cast<int32_t>(sets[t].size()));
          for (int32_t pos : sets[t]) {
            if (pos >= p->n_sink) reach = std::max(reach, t - pos);
          }
        }
        EXPECT_EQ(most, p->n_att);
        if (p->n_slots < grid.l_dec) {
          EXPECT_EQ(p->n_sink + reach + 1, p->n_slots);
        }
        // About budget / band rows up, never the whole image.
        EXPECT_LT(p->n_slots, grid.l_dec / 2);
      }
}

// Sparsity 0 is dense for grid_window and diagonal_grid, and for ssd's
// spatial heads (its semantic heads keep M(t) by construction).
TEST(PolicyReference, GridPoliciesAtSparsityZeroAreDense) {
  for (const GridGeometry& grid : {Grid(24, 0, 24), Grid(7, 1, 5), Grid(1, 0, 6)}) {
    auto dense = ResolvePolicy(PolicyParams{}, grid);
    ASSERT_TRUE(dense.ok());
    const auto expected = RunAndCheck(*dense, 9);
    for (PolicyKind kind : kGridKinds) {
      PolicyParams params;
      params.kind = kind;
      auto p = ResolvePolicy(params, grid);
      ASSERT_TRUE(p.ok()) << PolicyName(kind) << ": " << p.status();
      EXPECT_EQ(p->n_slots, grid.l_dec);
      EXPECT_EQ(RunAndCheck(*p, 9), expected) << PolicyName(kind) << " width " << grid.width;
      // The same slot order as dense, entry by entry (so the attention sums alike).
      PolicyRun a(*p), b(*dense);
      for (int32_t t = 0; t < grid.l_dec; ++t) {
        a.Plan(t);
        b.Plan(t);
        ASSERT_EQ(a.attended_slots(), b.attended_slots()) << PolicyName(kind) << " t " << t;
      }
    }
  }
}

}  // namespace
}  // namespace argen::sparse
