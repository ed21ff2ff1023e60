// The sparse-KV policy contract, written once for every backend.
//
// Decode KV of a row lives, per layer and kv head, in n_slots slots after the
// prompt region (layout [layer][kv_head][L_p + n_slots][head_dim]); the prompt
// is always attended in full and is not managed here. A policy owns, per
// (row, layer, kv_head), a small state in two flat POD arrays whose sizes come
// from LayoutFor(); the functions below touch only that state, so the same
// code runs on the CPU and in a CUDA kernel (one thread per (row, layer, head)).
//
// Per decode step t = 0, 1, ..., l_dec - 1 (t is the decode position of the
// token whose K/V this step computes), for each (row, layer, kv_head):
//   1. n = PlanStep(policy, layout, state, t, &write_slot, attended);
//      the backend writes the new token's K/V into write_slot (it may evict
//      whatever was there), then attends q to prompt + the n slots in
//      attended[0..n) (the new token is among them whenever it is attended).
//   2. if ObserveNeeded(policy, layout, state, t): ObserveStep(..., probs, n)
//      where probs[i] is the softmax weight of attended[i] over prompt +
//      attended keys, averaged over the query heads sharing the kv head (GQA).
//      Selection (argmin, accumulated scores) reuses exactly these weights.
// PlanStep returns -1 if t is not the next step or t >= l_dec.
//
// Bounds, for every policy and step: n == AttendedCount(policy, state, t) <=
// layout.max_attended == policy.n_att, slots used <= layout.n_slots ==
// policy.n_slots, and KvBytes() is the exact KV allocation of a request.
// InitState takes the head's index layer * kv_heads + kv_head (ssd reads its
// class from the policy's classification). Semantics of each policy:
// docs/policies.md.
#pragma once

#include <cstdint>

#include "kernels/sparse/policy_types.h"

#if defined(__CUDACC__)
#define ARGEN_SPARSE_HD __host__ __device__ inline
#else
#define ARGEN_SPARSE_HD inline
#endif

namespace argen::sparse {

// Sizes of the per-(row, layer, kv_head) state and of the attended list.
struct PolicyLayout {
  int32_t n_slots = 0;          // decode KV slots (the memory bound)
  int32_t max_attended = 0;     // capacity needed for the attended-slot list
  int32_t ints_per_head = 0;    // int32 state per (row, layer, kv_head)
  int32_t floats_per_head = 0;  // float state per (row, layer, kv_head)
  int32_t lag_capacity = 0;     // diagonal*: attended lags held
  int32_t skip_capacity = 0;    // diagonal*: skipped lags held (N_r' - N_att')
  // Offsets into the int array (line_evict: off_order, the resident slots
  // oldest first, i.e. its attended list; off_free, a stack of free slots).
  int32_t off_slot_pos = 0, off_lags = 0, off_skips = 0, off_order = 0, off_free = 0;
};

// One (row, layer, kv_head)'s state: views into the caller's flat arrays at
// head_index * ints_per_head and head_index * floats_per_head.
struct PolicyState {
  int32_t* ints = nullptr;
  float* floats = nullptr;
};

// Header of the int state.
enum PolicyStateHeader : int32_t {
  kStateNextStep = 0,   // the t PlanStep expects next
  kStateResident = 1,   // score policies: slots filled so far (line_evict: slots holding a key)
  kStateLagCount = 2,   // diagonal*: attended lags in the window
  kStateSkipCount = 3,  // diagonal*: skipped lags
  kStateAux = 4,        // ssd: 1 for a semantic head; diagonal_grid: the step its grid phase starts;
                        // line_evict: free slots on its stack
  kStateHeaderInts = 5,
  // Parallel decoding (PlanOutOfOrderQuery) reuses two ints the policies that
  // plan it otherwise leave unused, so their state (and a row's memory) keeps
  // its size: 1 once a non-dense state planned an out-of-order query, and
  // diagonal*'s window lags entered so far (each in the lags or the skips).
  kStateOutOfOrder = kStateAux,
  kStateFrontier = kStateResident,
};

namespace policy_detail {

ARGEN_SPARSE_HD bool IsDiagonal(PolicyKind k) { return k == PolicyKind::kDiagonal || k == PolicyKind::kDiagonalSink4; }
ARGEN_SPARSE_HD bool IsScoreBased(PolicyKind k) {
  return k == PolicyKind::kH2O || k == PolicyKind::kTova || k == PolicyKind::kAlisa;
}
ARGEN_SPARSE_HD int32_t Min(int32_t a, int32_t b) { return a < b ? a : b; }
ARGEN_SPARSE_HD int32_t Max(int32_t a, int32_t b) { return a > b ? a : b; }
ARGEN_SPARSE_HD int32_t Clamp(int32_t v, int32_t lo, int32_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Positional policies (dense, sliding, streaming, diagonal*, grid*, ssd's
// spatial heads): the first n_sink positions own slots 0..n_sink-1, later
// positions share a ring of n_slots - n_sink slots.
ARGEN_SPARSE_HD int32_t RingSlot(const ResolvedPolicy& p, int32_t pos) {
  if (pos < p.n_sink) return pos;
  const int32_t ring = p.n_slots - p.n_sink;
  return p.n_sink + (pos - p.n_sink) % ring;
}

// Recent keys after the sinks that a positional list attends: all resident
// ones for dense / sliding / streaming; N_att - n_sink for the grid policies
// before their neighbourhood exists (their ring is wider); W for ssd's spatial heads.
ARGEN_SPARSE_HD int32_t RecentWindow(const ResolvedPolicy& p) {
  if (p.kind == PolicyKind::kGridWindow || p.kind == PolicyKind::kDiagonalGrid) return p.n_att - p.n_sink;
  if (p.kind == PolicyKind::kSsd) return p.n_recent;
  return p.n_slots - p.n_sink;
}

// --- The grid neighbourhood (grid_window, diagonal_grid) -------------------
// The target is the token being generated, g = t + 1, at row r = g / P and
// column c = g % P (P = grid_period). Band columns are offsets j from c, key
// column c - j: BandLeft() columns left of c, BandRight() right of it.
ARGEN_SPARSE_HD int32_t BandLeft(const ResolvedPolicy& p) { return p.grid_band / 2; }
ARGEN_SPARSE_HD int32_t BandRight(const ResolvedPolicy& p) { return p.grid_band - 1 - p.grid_band / 2; }
// The o-th offset of a band, nearest first: 0, +1 (left), -1, +2, -2, ...
ARGEN_SPARSE_HD int32_t BandOffset(int32_t o) {
  const int32_t m = (o + 1) / 2;
  return (o & 1) ? m : -m;
}

// diagonal_grid's neighbourhood as fixed lags (t - position), nearest first:
// Lambda[i] = i for the run (i < grid_run), then row k = 1, 2, ... above the
// target: k * P - 1 + BandOffset(o), o < grid_band. Unclamped at the grid's
// edges (a lag is the same for every column, as Algorithm 1's skip set is).
// Distinct: ResolvePolicy keeps grid_run + BandRight() < P and grid_band <= P.
ARGEN_SPARSE_HD int32_t GridLag(const ResolvedPolicy& p, int32_t i) {
  if (i < p.grid_run) return i;
  const int32_t j = i - p.grid_run;
  return (1 + j / p.grid_band) * p.grid_period - 1 + BandOffset(j % p.grid_band);
}
ARGEN_SPARSE_HD int32_t GridLagMax(const ResolvedPolicy& p, int32_t n) {
  int32_t m = -1;
  for (int32_t i = 0; i < n; ++i) m = Max(m, GridLag(p, i));
  return m;
}

// grid_window's attended set at step t when `valid`, clamped to the grid's
// columns, nearest first: the run of the target's row (positions g - run ..
// g - 1, run = min(grid_run, c)); in the row above, the n1 columns nearest c
// (grid_band, plus the run's shortfall at the left edge, so the shape's depth
// does not grow there); then rows of grid_band columns nearest c, the last
// one cut to the `part` nearest. The budget N_att - n_sink is spent exactly.
// Not valid (the recent window is attended instead) in the first N_att steps
// and while the shape reaches above the image or into the sinks.
struct GridWindowShape {
  int32_t valid = 0;
  int32_t row = 0;  // r, the target's row
  int32_t run = 0;
  int32_t n1 = 0, lo1 = 0;        // row r - 1: columns [lo1, lo1 + n1)
  int32_t rows = 0, band_lo = 0;  // rows r - 1 - rows .. r - 2: columns [band_lo, band_lo + grid_band)
  int32_t part = 0, part_lo = 0;  // row r - 2 - rows: columns [part_lo, part_lo + part)
  int32_t reach = 0;              // t - (smallest attended position): the farthest lag
};

ARGEN_SPARSE_HD GridWindowShape GridWindowShapeAt(const ResolvedPolicy& p, int32_t t) {
  GridWindowShape s;
  const int32_t P = p.grid_period, w = p.grid_width, bw = p.grid_band;
  const int32_t g = t + 1, r = g / P, c = g - r * P;
  const int32_t budget = p.n_att - p.n_sink;
  s.row = r;
  s.run = Min(p.grid_run, Min(c, budget));  // the run stays in the target's row
  const int32_t rest1 = budget - s.run;
  s.n1 = Min(rest1, Min(w, bw + p.grid_run - s.run));
  s.lo1 = Clamp(c - s.n1 / 2, 0, w - s.n1);
  const int32_t rest2 = rest1 - s.n1;
  s.rows = rest2 / bw;
  s.part = rest2 - s.rows * bw;
  s.band_lo = Clamp(c - BandLeft(p), 0, w - bw);
  s.part_lo = Clamp(c - s.part / 2, 0, w - s.part);
  const int32_t depth = (s.n1 > 0 ? 1 : 0) + s.rows + (s.part > 0 ? 1 : 0);
  int32_t first = g - s.run;
  if (s.part > 0) {
    first = (r - s.rows - 2) * P + s.part_lo;
  } else if (s.rows > 0) {
    first = (r - s.rows - 1) * P + s.band_lo;
  } else if (s.n1 > 0) {
    first = (r - 1) * P + s.lo1;
  }
  s.reach = t - first;
  s.valid = (g > p.n_att && r >= depth && first >= p.n_sink) ? 1 : 0;
  return s;
}

// The farthest lag any valid grid_window shape attends (its ring size - 1).
ARGEN_SPARSE_HD int32_t GridWindowMaxLag(const ResolvedPolicy& p) {
  int32_t m = 0;
  // The shape depends on the target's column only (the row decides validity).
  for (int32_t c = 0; c < p.grid_period; ++c) {
    const GridWindowShape s = GridWindowShapeAt(p, p.grid_period * (p.n_att + 2) + c - 1);
    m = Max(m, s.reach);
  }
  return m;
}

// Entry k (after the sinks) of a valid shape's list, oldest first: the
// partial row, the full rows from the deepest, the row above, the run.
ARGEN_SPARSE_HD int32_t GridWindowPosition(const ResolvedPolicy& p, const GridWindowShape& s, int32_t t, int32_t k) {
  const int32_t P = p.grid_period, bw = p.grid_band;
  if (k < s.part) return (s.row - s.rows - 2) * P + s.part_lo + k;
  k -= s.part;
  if (k < s.rows * bw) return (s.row - s.rows - 1 + k / bw) * P + s.band_lo + k % bw;
  k -= s.rows * bw;
  if (k < s.n1) return (s.row - 1) * P + s.lo1 + k;
  return t + 1 - s.run + (k - s.n1);
}

// --- ssd ---------------------------------------------------------------------
// Semantic heads keep M(t) earlier keys plus the new one: M(t) =
// floor(t (0.1 + 0.2 t / (L_dec - 1))), 10% of the decoded tokens at the
// start, 30% at the last step (exact integer arithmetic, the same on every
// backend; grows by at most 1 a step), capped at N_att - 1.
ARGEN_SPARSE_HD int32_t SsdKeep(const ResolvedPolicy& p, int32_t t) {
  if (p.l_dec < 2 || t <= 0) return 0;
  const int64_t l1 = p.l_dec - 1;
  const int64_t m = (static_cast<int64_t>(t) * (l1 + 2 * static_cast<int64_t>(t))) / (10 * l1);
  return m < p.n_att - 1 ? static_cast<int32_t>(m) : p.n_att - 1;
}
// The grid's edge columns (first and last image column of a row), which
// semantic heads protect from eviction.
ARGEN_SPARSE_HD bool IsEdgeColumn(const ResolvedPolicy& p, int32_t pos) {
  const int32_t c = pos % p.grid_period;
  return c == 0 || c == p.grid_width - 1;
}

// --- line_evict ---------------------------------------------------------------
// A line starts at step t when its target g = t + 1 is the first token of a
// grid line (a period of P = grid_period positions). There the cache is cut
// to LineKeep(t) keys before t's K/V is written: the budget less the keys the
// new line writes (P, fewer in the last line), so it never exceeds n_slots.
ARGEN_SPARSE_HD bool LineStart(const ResolvedPolicy& p, int32_t t) { return (t + 1) % p.grid_period == 0; }
ARGEN_SPARSE_HD int32_t LineKeep(const ResolvedPolicy& p, int32_t t) {
  return p.n_slots - Min(p.grid_period, p.l_dec - t);
}

}  // namespace policy_detail

// Kinds whose selection is an argmin over the step's weights of the attended
// entries [DiagonalSelectionFirst, n) (the CUDA attention kernel can fuse it).
ARGEN_SPARSE_HD bool SelectsByArgmin(PolicyKind k) {
  return policy_detail::IsDiagonal(k) || k == PolicyKind::kDiagonalGrid;
}
// Kinds whose ObserveStep consumes the weights of every attended entry.
ARGEN_SPARSE_HD bool ObservesScores(PolicyKind k) {
  return policy_detail::IsScoreBased(k) || k == PolicyKind::kSsd || k == PolicyKind::kLineEvict;
}

// ssd: whether head `head_index` (layer * kv_heads + kv_head) is classified
// semantic; unclassified heads are spatial.
ARGEN_SPARSE_HD bool SsdHeadIsSemantic(const ResolvedPolicy& p, int32_t head_index) {
  if (p.kind != PolicyKind::kSsd || head_index < 0 || head_index >= p.ssd_heads) return false;
  return ((p.ssd_semantic[head_index >> 5] >> (head_index & 31)) & 1u) != 0;
}

ARGEN_SPARSE_HD PolicyLayout LayoutFor(const ResolvedPolicy& p) {
  using namespace policy_detail;
  PolicyLayout l;
  l.n_slots = p.n_slots;
  l.max_attended = p.n_att;
  if (IsDiagonal(p.kind) || p.kind == PolicyKind::kDiagonalGrid) {
    const int32_t window = p.n_recent - p.n_sink;  // N_r'
    const int32_t budget = p.n_att - p.n_sink;     // N_att'
    l.lag_capacity = Min(window, budget);
    l.skip_capacity = Max(0, window - budget);
  }
  l.off_slot_pos = kStateHeaderInts;
  l.off_lags = l.off_slot_pos + l.n_slots;
  l.off_skips = l.off_lags + l.lag_capacity;
  l.off_order = l.off_skips + l.skip_capacity;
  l.off_free = l.off_order;
  if (p.kind == PolicyKind::kLineEvict) l.off_free = l.off_order + l.n_slots;
  l.ints_per_head = p.kind == PolicyKind::kLineEvict ? l.off_free + l.n_slots : l.off_order;
  l.floats_per_head = ObservesScores(p.kind) ? l.n_slots : 0;
  return l;
}

// Exact KV bytes of `rows` rows: K and V of prompt_len + n_slots positions per
// layer and kv head. Admission uses it; backends allocate exactly this.
ARGEN_SPARSE_HD int64_t KvBytes(const ResolvedPolicy& p, int32_t prompt_len, int32_t rows, int32_t layers,
                                int32_t kv_heads, int32_t head_dim, int32_t bytes_per_elem) {
  return int64_t{2} * rows * layers * kv_heads * (static_cast<int64_t>(prompt_len) + p.n_slots) * head_dim *
         bytes_per_elem;
}

// head_index: layer * kv_heads + kv_head of the state's head (ssd reads its
// class from the policy; the other policies ignore it).
ARGEN_SPARSE_HD void InitState(const ResolvedPolicy& p, const PolicyLayout& l, PolicyState s, int32_t head_index = -1) {
  for (int32_t i = 0; i < l.ints_per_head; ++i) s.ints[i] = 0;
  for (int32_t i = 0; i < l.n_slots; ++i) s.ints[l.off_slot_pos + i] = -1;
  for (int32_t i = 0; i < l.floats_per_head; ++i) s.floats[i] = 0.0f;
  if (p.kind == PolicyKind::kSsd) s.ints[kStateAux] = SsdHeadIsSemantic(p, head_index) ? 1 : 0;
  if (p.kind == PolicyKind::kDiagonalGrid) {
    // The grid phase starts once every lag of the initial set exists.
    s.ints[kStateAux] = p.n_sink + policy_detail::GridLagMax(p, p.n_att - p.n_sink);
  }
  if (p.kind == PolicyKind::kLineEvict) {
    // Every slot free, slot 0 on top: the first keys take slots 0, 1, 2, ...
    for (int32_t i = 0; i < l.n_slots; ++i) s.ints[l.off_free + i] = l.n_slots - 1 - i;
    s.ints[kStateAux] = l.n_slots;
  }
}

// Decode position held by `slot`, or -1 when empty (introspection, tests).
ARGEN_SPARSE_HD int32_t SlotPosition(const PolicyLayout& l, const PolicyState& s, int32_t slot) {
  return s.ints[l.off_slot_pos + slot];
}

// Diagonal*: the skipped lags (t - position of a skipped key, fixed per entry).
ARGEN_SPARSE_HD int32_t SkipCount(const PolicyState& s) { return s.ints[kStateSkipCount]; }
ARGEN_SPARSE_HD int32_t SkipLag(const PolicyLayout& l, const PolicyState& s, int32_t i) {
  return s.ints[l.off_skips + i];
}

// ssd: whether the state's head is a semantic one (set by InitState).
ARGEN_SPARSE_HD bool SsdSemanticState(const ResolvedPolicy& p, const PolicyState& s) {
  return p.kind == PolicyKind::kSsd && s.ints[kStateAux] == 1;
}

// The exact number of decode keys step t attends (the per-step cost): a
// function of the policy, the head's class and t only, never of the scores.
// min(t + 1, N_att) for every policy except ssd's semantic heads, which
// attend min(t, M(t)) + 1 (SsdKeep) and its spatial heads min(t + 1, n_sink + W),
// and line_evict: the keys kept at the last line start t0 <= t,
// min(t0, LineKeep(t0)), plus the t - t0 + 1 written since (t + 1 before the
// first line start).
ARGEN_SPARSE_HD int32_t AttendedCount(const ResolvedPolicy& p, bool ssd_semantic, int32_t t) {
  using namespace policy_detail;
  if (t < 0 || t >= p.l_dec) return -1;
  if (p.kind == PolicyKind::kSsd) {
    if (ssd_semantic) return Min(t, SsdKeep(p, t)) + 1;
    return Min(t + 1, p.n_sink + p.n_recent);
  }
  if (p.kind == PolicyKind::kLineEvict) {
    const int32_t t0 = (t + 1) / p.grid_period * p.grid_period - 1;
    if (t0 < 0) return t + 1;
    return Min(t0, LineKeep(p, t0)) + (t - t0) + 1;
  }
  return Min(t + 1, p.n_att);
}

// diagonal_grid: whether the grid phase's next lag Lambda[N_att' + skips]
// exists at step t + 1, so that a key skipped at step t is replaced.
ARGEN_SPARSE_HD bool DiagonalGridCanSelect(const ResolvedPolicy& p, const PolicyLayout& l, const PolicyState& s,
                                           int32_t t) {
  const int32_t skips = s.ints[kStateSkipCount];
  if (s.ints[kStateLagCount] == 0 || skips >= l.skip_capacity) return false;
  return policy_detail::GridLag(p, p.n_att - p.n_sink + skips) <= t + 1 - p.n_sink;
}

// Whether a row of this policy may decode out of order (PlanOutOfOrderQuery below).
ARGEN_SPARSE_HD bool PlansOutOfOrder(const ResolvedPolicy& p) {
  switch (p.kind) {
    case PolicyKind::kDense:
      return p.n_slots >= p.l_dec;
    case PolicyKind::kSlidingWindow:
    case PolicyKind::kStreamingLlm:
    case PolicyKind::kDiagonal:
    case PolicyKind::kDiagonalSink4:
      return true;
    default:
      return false;
  }
}

// Whether the state planned an out-of-order query (parallel decoding): from
// then on every query of the row is planned by PlanOutOfOrderQuery, in order
// or not. Never for dense, whose two plans agree (kStateOutOfOrder is another
// policy's kStateAux: only the kinds that plan out of order read it).
ARGEN_SPARSE_HD bool PlannedOutOfOrder(const ResolvedPolicy& p, const PolicyState& s) {
  return p.kind != PolicyKind::kDense && PlansOutOfOrder(p) && s.ints[kStateOutOfOrder] != 0;
}

// Diagonal* out of order: whether the query at t, once planned, selects (its
// window lags reach the budget N_att' within [0, t - n_sink] and the skip set
// has room). In order this is exactly the sequential rule below (phase 2).
ARGEN_SPARSE_HD bool OutOfOrderSelects(const ResolvedPolicy& p, const PolicyLayout& l, const PolicyState& s,
                                       int32_t t) {
  if (!policy_detail::IsDiagonal(p.kind) || t < p.n_sink) return false;
  const int32_t n_lags = s.ints[kStateLagCount];
  if (s.ints[kStateSkipCount] >= l.skip_capacity || n_lags < l.lag_capacity || n_lags <= 0) return false;
  return s.ints[l.off_lags + n_lags - 1] <= t - p.n_sink;
}

// Whether ObserveStep does anything at step t (so a backend can skip
// producing the probabilities). Call after PlanStep(t).
ARGEN_SPARSE_HD bool ObserveNeeded(const ResolvedPolicy& p, const PolicyLayout& l, const PolicyState& s, int32_t t) {
  using namespace policy_detail;
  if (PlannedOutOfOrder(p, s)) return OutOfOrderSelects(p, l, s, t);
  if (IsScoreBased(p.kind) || p.kind == PolicyKind::kLineEvict) return true;
  if (p.kind == PolicyKind::kSsd) return SsdSemanticState(p, s);
  if (p.kind == PolicyKind::kDiagonalGrid) return DiagonalGridCanSelect(p, l, s, t);
  if (!IsDiagonal(p.kind)) return false;
  const int32_t u = t - p.n_sink;  // step inside the diagonal region
  return u >= 0 && u >= (p.n_att - p.n_sink) - 1 && s.ints[kStateSkipCount] < l.skip_capacity;
}

namespace policy_detail {

// Score-based caches: the victim slot among slots 0..n-1, the lowest score
// with ties to the oldest position, among the positions in [oldest_evictable,
// newest_evictable]; ssd (protect_edges) prefers keys outside the grid's
// edge columns and takes an edge key only when no other is resident.
ARGEN_SPARSE_HD int32_t ScoreVictim(const ResolvedPolicy& p, const PolicyLayout& l, const PolicyState& s,
                                    int32_t oldest_evictable, int32_t newest_evictable, bool protect_edges) {
  const int32_t* slot_pos = s.ints + l.off_slot_pos;
  int32_t best = -1, best_edge = -1;
  for (int32_t i = 0; i < l.n_slots; ++i) {
    const int32_t pos = slot_pos[i];
    if (pos < 0 || pos < oldest_evictable || pos > newest_evictable) continue;
    int32_t& b = protect_edges && IsEdgeColumn(p, pos) ? best_edge : best;
    const float v = s.floats[i];
    if (b < 0 || v < s.floats[b] || (v == s.floats[b] && pos < slot_pos[b])) b = i;
  }
  return best >= 0 ? best : best_edge;
}

// Inserts lag into the ascending list lags[0..n) (n + 1 entries after).
ARGEN_SPARSE_HD void InsertSorted(int32_t* lags, int32_t n, int32_t lag) {
  int32_t i = n;
  while (i > 0 && lags[i - 1] > lag) {
    lags[i] = lags[i - 1];
    --i;
  }
  lags[i] = lag;
}

}  // namespace policy_detail

// PlanStep's state update alone: advances the state to step t, sets the write
// slot and returns the attended count n (-1 as PlanStep), without writing the
// list. Entry i < n of the list is then AttendedSlot(p, l, s, t, i).
ARGEN_SPARSE_HD int32_t PlanStepState(const ResolvedPolicy& p, const PolicyLayout& l, PolicyState s, int32_t t,
                                      int32_t* write_slot) {
  using namespace policy_detail;
  if (t != s.ints[kStateNextStep] || t < 0 || t >= p.l_dec) return -1;
  s.ints[kStateNextStep] = t + 1;
  int32_t* slot_pos = s.ints + l.off_slot_pos;

  const bool semantic = SsdSemanticState(p, s);
  if (IsScoreBased(p.kind) || semantic) {
    // Cache of n_slots keys (ssd's semantic heads: M(t) + 1); when full, the
    // new token replaces a victim chosen from the scores observed so far.
    int32_t resident = s.ints[kStateResident];
    const int32_t capacity = semantic ? SsdKeep(p, t) + 1 : l.n_slots;
    int32_t slot;
    if (resident < capacity) {
      slot = resident++;
      s.ints[kStateResident] = resident;
    } else if (resident == capacity) {
      // h2o/alisa protect the n_recent most recent positions (t included);
      // tova and ssd none but the new token.
      const int32_t newest_evictable =
          p.kind == PolicyKind::kH2O || p.kind == PolicyKind::kAlisa ? t - p.n_recent : t - 1;
      slot = ScoreVictim(p, l, s, 0, newest_evictable, semantic);
      if (slot < 0) return -1;  // unreachable for a validated policy
    } else {
      return -1;  // unreachable: M(t) grows by at most 1 a step
    }
    slot_pos[slot] = t;
    s.floats[slot] = 0.0f;
    *write_slot = slot;
    return resident;  // slots 0..resident-1
  }

  if (p.kind == PolicyKind::kLineEvict) {
    int32_t* order = s.ints + l.off_order;
    int32_t* free_slots = s.ints + l.off_free;
    int32_t resident = s.ints[kStateResident];
    int32_t n_free = s.ints[kStateAux];
    if (LineStart(p, t) && resident > LineKeep(p, t)) {
      // Before the new line: evict the keys the last line attended least,
      // among those after the anchors and before the recent window (the
      // n_recent newest positions, t included, stay), ties to the oldest.
      const int32_t before = resident;
      while (resident > LineKeep(p, t)) {
        const int32_t victim = ScoreVictim(p, l, s, p.n_sink, t - p.n_recent, false);
        if (victim < 0) return -1;  // unreachable for a validated policy
        slot_pos[victim] = -1;
        free_slots[n_free++] = victim;
        --resident;
      }
      int32_t kept = 0;
      for (int32_t i = 0; i < before; ++i) {
        if (slot_pos[order[i]] >= 0) order[kept++] = order[i];
      }
    }
    if (LineStart(p, t)) {
      // The scores are per line: the next line's attention starts from zero.
      for (int32_t i = 0; i < l.n_slots; ++i) s.floats[i] = 0.0f;
    }
    if (n_free < 1) return -1;  // unreachable: LineKeep leaves room for the line
    const int32_t slot = free_slots[--n_free];
    slot_pos[slot] = t;
    order[resident++] = slot;
    s.ints[kStateResident] = resident;
    s.ints[kStateAux] = n_free;
    *write_slot = slot;
    return resident;  // order[0..resident): oldest first, t last
  }

  const int32_t slot = RingSlot(p, t);
  slot_pos[slot] = t;
  *write_slot = slot;
  const int32_t sinks = Min(t + 1, p.n_sink);
  if (t < p.n_sink) return sinks;

  if (p.kind == PolicyKind::kGridWindow) {
    if (GridWindowShapeAt(p, t).valid) return p.n_att;
  } else if (p.kind == PolicyKind::kDiagonalGrid) {
    int32_t* lags = s.ints + l.off_lags;
    int32_t n_lags = s.ints[kStateLagCount];
    if (n_lags == 0 && t >= s.ints[kStateAux]) {
      // The grid phase starts: the initial set Lambda[0, N_att'), ascending.
      n_lags = p.n_att - p.n_sink;
      for (int32_t i = 0; i < n_lags; ++i) InsertSorted(lags, i, GridLag(p, i));
      s.ints[kStateLagCount] = n_lags;
    }
    if (n_lags > 0) return sinks + n_lags;
  }

  if (!IsDiagonal(p.kind)) {
    // dense / sliding_window / streaming_llm / ssd's spatial heads, and the
    // grid policies before their neighbourhood exists: the sinks, then the
    // last RecentWindow() positions in slot order (see AttendedSlot).
    const int32_t first = Max(p.n_sink, t - RecentWindow(p) + 1);
    return sinks + (t - first + 1);
  }

  // diagonal (Algorithm 1) on positions >= n_sink with window N_r' and budget
  // N_att'. Skip decisions are lags (t - position), constant as t advances:
  // that is the "+1 shift" of skip_idx. The attended lags are the window's
  // lags minus the skipped ones, held ascending in `lags`.
  const int32_t u = t - p.n_sink;
  const int32_t window = p.n_recent - p.n_sink;
  int32_t* lags = s.ints + l.off_lags;
  int32_t n_lags = s.ints[kStateLagCount];
  if (u < window) {
    // The window grows by one: the oldest position (lag u) enters it.
    lags[n_lags++] = u;
    s.ints[kStateLagCount] = n_lags;
  }
  return sinks + n_lags;
}

// Entry i (< the n PlanStepState(t) returned) of step t's attended list, from
// the state PlanStepState(t) left: O(1) per entry, so a backend may write the
// list in parallel. PlanStep writes exactly these entries.
ARGEN_SPARSE_HD int32_t AttendedSlot(const ResolvedPolicy& p, const PolicyLayout& l, const PolicyState& s, int32_t t,
                                     int32_t i) {
  using namespace policy_detail;
  if (IsScoreBased(p.kind) || SsdSemanticState(p, s)) return i;  // slots 0..resident-1
  if (p.kind == PolicyKind::kLineEvict) return s.ints[l.off_order + i];
  const int32_t sinks = Min(t + 1, p.n_sink);
  if (i < sinks) return RingSlot(p, i);
  const int32_t k = i - sinks;
  if (p.kind == PolicyKind::kGridWindow) {
    const GridWindowShape shape = GridWindowShapeAt(p, t);
    if (shape.valid) return RingSlot(p, GridWindowPosition(p, shape, t, k));
  }
  const int32_t* lags = s.ints + l.off_lags;
  const int32_t n_lags = s.ints[kStateLagCount];
  if (IsDiagonal(p.kind) || (p.kind == PolicyKind::kDiagonalGrid && n_lags > 0)) {
    // diagonal*: the sinks, then the window oldest first (largest lag first).
    return RingSlot(p, t - lags[n_lags - 1 - k]);
  }
  // Positional lists in slot (memory) order: when the ring has wrapped, the
  // newer part (low slots n_sink..s_last) comes first, then
  // s_first..n_slots-1. Monotonic addresses keep the hardware prefetcher
  // streaming (measured ~20-30% on CPU at 96%).
  const int32_t first = Max(p.n_sink, t - RecentWindow(p) + 1);
  const int32_t s_first = RingSlot(p, first), s_last = RingSlot(p, t);
  if (s_first <= s_last) return s_first + k;
  const int32_t low = s_last - p.n_sink + 1;
  return k < low ? p.n_sink + k : s_first + (k - low);
}

ARGEN_SPARSE_HD int32_t PlanStep(const ResolvedPolicy& p, const PolicyLayout& l, PolicyState s, int32_t t,
                                 int32_t* write_slot, int32_t* attended) {
  const int32_t n = PlanStepState(p, l, s, t, write_slot);
  for (int32_t i = 0; i < n; ++i) attended[i] = AttendedSlot(p, l, s, t, i);
  return n;
}

// Out-of-order decoding (parallel decoding, engine/model/step_plan.h): the
// query at decode index t when indices are written in any order, for dense,
// sliding_window, streaming_llm, diagonal and diagonal_sink4
// (docs/policies.md, "Several queries per row"). The policy's set for t in
// raster terms (its sinks and window lags, diagonal's skipped lags removed)
// restricted to the keys resident and written: never an unwritten or
// evicted slot. Slots stay position-based (RingSlot), so the KV bound is
// unchanged: each query's own K/V goes to RingSlot(t), evicting the key
// there; a provisional query's (it writes nothing) leaves that slot empty.
// Diagonal's window lags are the nearest N_att' lags not skipped, entered in
// order (kStateFrontier), so a window that outruns the skip set still
// attends at most N_att'. In order from a sequential state each list holds
// exactly PlanStep's keys (oldest first), and in-order steps of a state that
// went out of order stay on this plan (PlannedOutOfOrder).

// The state update of the query at t: marks the state out of order, enters
// diagonal's window lags up to t's, and puts the query's K/V in
// RingSlot(t) (*write_slot): written (`writes`), or scratch that evicts the
// key there (provisional). Returns 0, or -1 for another policy, t outside
// [0, l_dec) or t's slot holding t already.
ARGEN_SPARSE_HD int32_t PlanOutOfOrderState(const ResolvedPolicy& p, const PolicyLayout& l, PolicyState s, int32_t t,
                                            bool writes, int32_t* write_slot) {
  using namespace policy_detail;
  if (!PlansOutOfOrder(p) || t < 0 || t >= p.l_dec) return -1;
  int32_t* slot_pos = s.ints + l.off_slot_pos;
  const int32_t slot = RingSlot(p, t);
  if (slot_pos[slot] == t) return -1;  // written already
  const int32_t window = p.n_slots - p.n_sink;
  if (p.kind != PolicyKind::kDense && s.ints[kStateOutOfOrder] == 0) {
    // From a sequential state: every lag below its window was entered.
    s.ints[kStateOutOfOrder] = 1;
    s.ints[kStateFrontier] = Clamp(s.ints[kStateNextStep] - p.n_sink, 0, window);
  }
  if (IsDiagonal(p.kind) && t >= p.n_sink) {
    // The nearest not-skipped lags of t's window, at most N_att' of them.
    int32_t* lags = s.ints + l.off_lags;
    int32_t n_lags = s.ints[kStateLagCount], frontier = s.ints[kStateFrontier];
    const int32_t reach = Min(t - p.n_sink + 1, window);
    while (n_lags < l.lag_capacity && frontier < reach) lags[n_lags++] = frontier++;
    s.ints[kStateLagCount] = n_lags;
    s.ints[kStateFrontier] = frontier;
  }
  slot_pos[slot] = writes ? t : -1;
  if (writes && p.kind == PolicyKind::kDense) {
    // Dense keeps the lowest unwritten index, so its in-order steps may follow.
    int32_t next = s.ints[kStateNextStep];
    while (next < p.l_dec && slot_pos[next] >= 0) ++next;
    s.ints[kStateNextStep] = next;
  }
  *write_slot = slot;
  return 0;
}

// Candidates of an out-of-order list, in list order: the sinks by position,
// then the window lags from the largest (oldest key) to the smallest (the
// query itself, lag 0). Candidate k is attended when it is the query itself
// or its key is resident and written.
ARGEN_SPARSE_HD int32_t OutOfOrderCandidates(const ResolvedPolicy& p, const PolicyState& s) {
  return p.n_sink + (policy_detail::IsDiagonal(p.kind) ? s.ints[kStateLagCount] : p.n_slots - p.n_sink);
}
// Slot of candidate k for the query at t (after PlanOutOfOrderState(t)), or -1: not attended.
ARGEN_SPARSE_HD int32_t OutOfOrderCandidate(const ResolvedPolicy& p, const PolicyLayout& l, const PolicyState& s,
                                            int32_t t, int32_t k) {
  using namespace policy_detail;
  const int32_t* slot_pos = s.ints + l.off_slot_pos;
  if (k < p.n_sink) {
    if (k > t) return -1;
    return k == t || slot_pos[k] == k ? k : -1;
  }
  const int32_t j = k - p.n_sink;
  const int32_t lag =
      IsDiagonal(p.kind) ? s.ints[l.off_lags + s.ints[kStateLagCount] - 1 - j] : (p.n_slots - p.n_sink) - 1 - j;
  const int32_t pos = t - lag;
  if (pos < p.n_sink) return -1;
  const int32_t slot = RingSlot(p, pos);
  return lag == 0 || slot_pos[slot] == pos ? slot : -1;
}

// The whole plan of the query at t: the state update, then the attended
// list (the attended candidates in candidate order). Returns the count, or
// -1 as PlanOutOfOrderState. Dense: the written indices below t, then t.
ARGEN_SPARSE_HD int32_t PlanOutOfOrderQuery(const ResolvedPolicy& p, const PolicyLayout& l, PolicyState s, int32_t t,
                                            bool writes, int32_t* write_slot, int32_t* attended) {
  if (PlanOutOfOrderState(p, l, s, t, writes, write_slot) < 0) return -1;
  int32_t n = 0;
  const int32_t candidates = OutOfOrderCandidates(p, s);
  for (int32_t k = 0; k < candidates; ++k) {
    const int32_t slot = OutOfOrderCandidate(p, l, s, t, k);
    if (slot >= 0) attended[n++] = slot;
  }
  return n;
}

// A decode query of a backend: the sequential PlanStep while the row decodes
// in order (in_order: its step's queries are consecutive from its next step)
// and its state never went out of order, else PlanOutOfOrderQuery.
ARGEN_SPARSE_HD int32_t PlanQuery(const ResolvedPolicy& p, const PolicyLayout& l, PolicyState s, int32_t t,
                                  bool in_order, bool writes, int32_t* write_slot, int32_t* attended) {
  if (in_order && !PlannedOutOfOrder(p, s)) return PlanStep(p, l, s, t, write_slot, attended);
  return PlanOutOfOrderQuery(p, l, s, t, writes, write_slot, attended);
}

// Out-of-order lists hold the sinks first: the number of leading entries
// that are sinks (slots below n_sink), where a selection's argmin starts.
ARGEN_SPARSE_HD int32_t OutOfOrderSinkEntries(const ResolvedPolicy& p, const int32_t* attended, int32_t count) {
  int32_t i = 0;
  while (i < count && attended[i] < p.n_sink) ++i;
  return i;
}

// Diagonal*: a selection step chooses among the attended entries [first, count)
// with first = DiagonalSelectionFirst(p): the sinks come first in PlanStep's
// list, and at every step where ObserveNeeded holds count - (attended lags)
// equals n_sink (engine/sparse/tests/policy_test.cc checks it). The same
// holds for diagonal_grid.
ARGEN_SPARSE_HD int32_t DiagonalSelectionFirst(const ResolvedPolicy& p) { return p.n_sink; }

// Index of the smallest of probs[first, count), ties to the lowest index (for
// the diagonal lists: the oldest key); -1 when the range is empty. The CUDA
// attention kernel computes the same argmin (kernels/attention.h).
ARGEN_SPARSE_HD int32_t ArgminFrom(const float* probs, int32_t first, int32_t count) {
  if (first < 0 || first >= count) return -1;
  int32_t best = first;
  for (int32_t i = first + 1; i < count; ++i) {
    if (probs[i] < probs[best]) best = i;
  }
  return best;
}

// Diagonal* and diagonal_grid: applies step t's selection: attended entry
// `entry` (an index into PlanStep's list of `count` entries, chosen by the
// argmin) joins the skip set; its lag is skipped from step t + 1 on
// (diagonal_grid: the next lag of its neighbourhood, Lambda[N_att' + skips],
// replaces it). No-op unless ObserveNeeded(t) holds and `entry` is one of
// the non-sink entries. ObserveStep calls it; a backend that computes the
// argmin elsewhere (the CUDA attention kernel) calls it directly.
//   Out of order (PlannedOutOfOrder): `attended` (the query's list) maps the
// entry to its key's lag t - position (the query's own slot: lag 0); a sink
// entry or no list selects nothing. The lag leaves the window lags for the
// skip set; the next query enters the next lag (kStateFrontier).
ARGEN_SPARSE_HD void ApplyDiagonalSelection(const ResolvedPolicy& p, const PolicyLayout& l, PolicyState s, int32_t t,
                                            int32_t count, int32_t entry, const int32_t* attended = nullptr) {
  using namespace policy_detail;
  if (!SelectsByArgmin(p.kind) || !ObserveNeeded(p, l, s, t)) return;
  int32_t* lags = s.ints + l.off_lags;
  const int32_t n_lags = s.ints[kStateLagCount];
  if (PlannedOutOfOrder(p, s)) {
    if (attended == nullptr || entry < 0 || entry >= count) return;
    const int32_t slot = attended[entry];
    if (slot < p.n_sink) return;
    const int32_t lag = slot == RingSlot(p, t) ? 0 : t - s.ints[l.off_slot_pos + slot];
    int32_t i = 0;
    while (i < n_lags && lags[i] != lag) ++i;
    if (i == n_lags) return;  // unreachable: every listed key's lag is a window lag
    for (; i + 1 < n_lags; ++i) lags[i] = lags[i + 1];
    s.ints[kStateLagCount] = n_lags - 1;
    s.ints[l.off_skips + s.ints[kStateSkipCount]] = lag;
    s.ints[kStateSkipCount] += 1;
    return;
  }
  const int32_t first = count - n_lags;  // sinks come first
  if (n_lags <= 0 || first < 0 || entry < first || entry >= count) return;
  const int32_t lag_index = n_lags - 1 - (entry - first);
  const int32_t lag = lags[lag_index];
  for (int32_t i = lag_index; i + 1 < n_lags; ++i) lags[i] = lags[i + 1];
  const int32_t skips = s.ints[kStateSkipCount];
  s.ints[l.off_skips + skips] = lag;
  s.ints[kStateSkipCount] = skips + 1;
  if (p.kind == PolicyKind::kDiagonalGrid) {
    InsertSorted(lags, n_lags - 1, GridLag(p, p.n_att - p.n_sink + skips));
  } else {
    s.ints[kStateLagCount] = n_lags - 1;
  }
}

ARGEN_SPARSE_HD void ObserveStep(const ResolvedPolicy& p, const PolicyLayout& l, PolicyState s, int32_t t,
                                 const int32_t* attended, const float* probs, int32_t count) {
  using namespace policy_detail;
  switch (p.kind) {
    case PolicyKind::kH2O:
    case PolicyKind::kLineEvict:  // summed over the line's queries (reset at each line start)
      for (int32_t i = 0; i < count; ++i) s.floats[attended[i]] += probs[i];
      return;
    case PolicyKind::kSsd:
      // Semantic heads: accumulated attention, as h2o.
      if (!SsdSemanticState(p, s)) return;
      for (int32_t i = 0; i < count; ++i) s.floats[attended[i]] += probs[i];
      return;
    case PolicyKind::kTova:
      for (int32_t i = 0; i < count; ++i) s.floats[attended[i]] = probs[i];
      return;
    case PolicyKind::kAlisa: {
      // Accumulated score over recent steps: exponentially decayed sum with
      // time constant n_recent (docs/policies.md).
      const float decay = 1.0f - 1.0f / static_cast<float>(p.n_recent);
      for (int32_t i = 0; i < count; ++i) {
        float& v = s.floats[attended[i]];
        v = v * decay + probs[i];
      }
      return;
    }
    case PolicyKind::kDiagonal:
    case PolicyKind::kDiagonalSink4:
    case PolicyKind::kDiagonalGrid: {
      if (!ObserveNeeded(p, l, s, t)) return;
      if (PlannedOutOfOrder(p, s)) {
        const int32_t first = OutOfOrderSinkEntries(p, attended, count);
        ApplyDiagonalSelection(p, l, s, t, count, ArgminFrom(probs, first, count), attended);
        return;
      }
      // Newly skipped key: argmin over the non-sink attended keys (ties: the
      // oldest). Its lag is skipped from step t + 1 on.
      const int32_t n_lags = s.ints[kStateLagCount];
      const int32_t first = count - n_lags;  // sinks come first
      if (n_lags <= 0 || first < 0) return;
      ApplyDiagonalSelection(p, l, s, t, count, ArgminFrom(probs, first, count));
      return;
    }
    default:
      return;
  }
}

}  // namespace argen::sparse
