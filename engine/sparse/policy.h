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
// Bounds, for every policy and step: n <= layout.max_attended == policy.n_att,
// slots used <= layout.n_slots == policy.n_slots, and KvBytes() is the exact
// KV allocation of a request. Semantics of each policy: docs/policies.md.
#pragma once

#include <cstdint>

#include "engine/sparse/policy_types.h"

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
  // Offsets into the int array.
  int32_t off_slot_pos = 0, off_lags = 0, off_skips = 0;
};

// One (row, layer, kv_head)'s state: views into the caller's flat arrays at
// head_index * ints_per_head and head_index * floats_per_head.
struct PolicyState {
  int32_t* ints = nullptr;
  float* floats = nullptr;
};

// Header of the int state.
enum PolicyStateHeader : int32_t {
  kStateNextStep = 0,  // the t PlanStep expects next
  kStateResident = 1,  // score policies: slots filled so far
  kStateLagCount = 2,  // diagonal*: attended lags in the window
  kStateSkipCount = 3, // diagonal*: skipped lags
  kStateHeaderInts = 4,
};

namespace policy_detail {

ARGEN_SPARSE_HD bool IsDiagonal(PolicyKind k) {
  return k == PolicyKind::kDiagonal || k == PolicyKind::kDiagonalSink4;
}
ARGEN_SPARSE_HD bool IsScoreBased(PolicyKind k) {
  return k == PolicyKind::kH2O || k == PolicyKind::kTova || k == PolicyKind::kAlisa;
}
ARGEN_SPARSE_HD int32_t Min(int32_t a, int32_t b) { return a < b ? a : b; }
ARGEN_SPARSE_HD int32_t Max(int32_t a, int32_t b) { return a > b ? a : b; }

// Positional policies (dense, sliding, streaming, diagonal*): the first n_sink
// positions own slots 0..n_sink-1, later positions share a ring of
// n_slots - n_sink slots.
ARGEN_SPARSE_HD int32_t RingSlot(const ResolvedPolicy& p, int32_t pos) {
  if (pos < p.n_sink) return pos;
  const int32_t ring = p.n_slots - p.n_sink;
  return p.n_sink + (pos - p.n_sink) % ring;
}

}  // namespace policy_detail

ARGEN_SPARSE_HD PolicyLayout LayoutFor(const ResolvedPolicy& p) {
  using namespace policy_detail;
  PolicyLayout l;
  l.n_slots = p.n_slots;
  l.max_attended = p.n_att;
  if (IsDiagonal(p.kind)) {
    const int32_t window = p.n_recent - p.n_sink;  // N_r'
    const int32_t budget = p.n_att - p.n_sink;     // N_att'
    l.lag_capacity = Min(window, budget);
    l.skip_capacity = Max(0, window - budget);
  }
  l.off_slot_pos = kStateHeaderInts;
  l.off_lags = l.off_slot_pos + l.n_slots;
  l.off_skips = l.off_lags + l.lag_capacity;
  l.ints_per_head = l.off_skips + l.skip_capacity;
  l.floats_per_head = IsScoreBased(p.kind) ? l.n_slots : 0;
  return l;
}

// Exact KV bytes of `rows` rows: K and V of prompt_len + n_slots positions per
// layer and kv head. Admission uses it; backends allocate exactly this.
ARGEN_SPARSE_HD int64_t KvBytes(const ResolvedPolicy& p, int32_t prompt_len, int32_t rows,
                                int32_t layers, int32_t kv_heads, int32_t head_dim,
                                int32_t bytes_per_elem) {
  return int64_t{2} * rows * layers * kv_heads *
         (static_cast<int64_t>(prompt_len) + p.n_slots) * head_dim * bytes_per_elem;
}

ARGEN_SPARSE_HD void InitState(const ResolvedPolicy& p, const PolicyLayout& l, PolicyState s) {
  for (int32_t i = 0; i < l.ints_per_head; ++i) s.ints[i] = 0;
  for (int32_t i = 0; i < l.n_slots; ++i) s.ints[l.off_slot_pos + i] = -1;
  for (int32_t i = 0; i < l.floats_per_head; ++i) s.floats[i] = 0.0f;
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

// Whether ObserveStep does anything at step t (so a backend can skip
// producing the probabilities). Call after PlanStep(t).
ARGEN_SPARSE_HD bool ObserveNeeded(const ResolvedPolicy& p, const PolicyLayout& l,
                                   const PolicyState& s, int32_t t) {
  using namespace policy_detail;
  if (IsScoreBased(p.kind)) return true;
  if (!IsDiagonal(p.kind)) return false;
  const int32_t u = t - p.n_sink;  // step inside the diagonal region
  return u >= 0 && u >= (p.n_att - p.n_sink) - 1 && s.ints[kStateSkipCount] < l.skip_capacity;
}

// PlanStep's state update alone: advances the state to step t, sets the write
// slot and returns the attended count n (-1 as PlanStep), without writing the
// list. Entry i < n of the list is then AttendedSlot(p, l, s, t, i).
ARGEN_SPARSE_HD int32_t PlanStepState(const ResolvedPolicy& p, const PolicyLayout& l, PolicyState s,
                                      int32_t t, int32_t* write_slot) {
  using namespace policy_detail;
  if (t != s.ints[kStateNextStep] || t < 0 || t >= p.l_dec) return -1;
  s.ints[kStateNextStep] = t + 1;
  int32_t* slot_pos = s.ints + l.off_slot_pos;

  if (IsScoreBased(p.kind)) {
    // Cache of n_slots keys; when full, the new token replaces a victim chosen
    // from the scores observed so far (ties: the oldest position).
    int32_t resident = s.ints[kStateResident];
    int32_t slot;
    if (resident < l.n_slots) {
      slot = resident++;
      s.ints[kStateResident] = resident;
    } else {
      // h2o/alisa protect the n_recent most recent positions (t included).
      const int32_t newest_evictable = p.kind == PolicyKind::kTova ? t - 1 : t - p.n_recent;
      slot = -1;
      float best = 0.0f;
      for (int32_t i = 0; i < l.n_slots; ++i) {
        const int32_t pos = slot_pos[i];
        if (pos > newest_evictable) continue;
        const float v = s.floats[i];
        if (slot < 0 || v < best || (v == best && pos < slot_pos[slot])) {
          slot = i;
          best = v;
        }
      }
      if (slot < 0) return -1;  // unreachable for a validated policy
    }
    slot_pos[slot] = t;
    s.floats[slot] = 0.0f;
    *write_slot = slot;
    return resident;  // slots 0..resident-1
  }

  const int32_t slot = RingSlot(p, t);
  slot_pos[slot] = t;
  *write_slot = slot;
  const int32_t sinks = Min(t + 1, p.n_sink);
  if (t < p.n_sink) return sinks;

  if (!IsDiagonal(p.kind)) {
    // dense / sliding_window / streaming_llm: the sinks, then the last
    // (n_slots - n_sink) positions in slot order (see AttendedSlot).
    const int32_t first = Max(p.n_sink, t - (p.n_slots - p.n_sink) + 1);
    const int32_t s_first = RingSlot(p, first), s_last = RingSlot(p, t);
    if (s_first <= s_last) return sinks + (s_last - s_first + 1);
    return sinks + (s_last - p.n_sink + 1) + (p.n_slots - s_first);
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
ARGEN_SPARSE_HD int32_t AttendedSlot(const ResolvedPolicy& p, const PolicyLayout& l, const PolicyState& s,
                                     int32_t t, int32_t i) {
  using namespace policy_detail;
  if (IsScoreBased(p.kind)) return i;  // slots 0..resident-1
  const int32_t sinks = Min(t + 1, p.n_sink);
  if (i < sinks) return RingSlot(p, i);
  const int32_t k = i - sinks;
  if (!IsDiagonal(p.kind)) {
    // Slot (memory) order: when the ring has wrapped, the newer part (low
    // slots n_sink..s_last) comes first, then s_first..n_slots-1. Monotonic
    // addresses keep the hardware prefetcher streaming (measured ~20-30% on
    // CPU at 96%).
    const int32_t first = Max(p.n_sink, t - (p.n_slots - p.n_sink) + 1);
    const int32_t s_first = RingSlot(p, first), s_last = RingSlot(p, t);
    if (s_first <= s_last) return s_first + k;
    const int32_t low = s_last - p.n_sink + 1;
    return k < low ? p.n_sink + k : s_first + (k - low);
  }
  // diagonal*: the sinks, then the window oldest first (largest lag first).
  const int32_t* lags = s.ints + l.off_lags;
  const int32_t n_lags = s.ints[kStateLagCount];
  return RingSlot(p, t - lags[n_lags - 1 - k]);
}

ARGEN_SPARSE_HD int32_t PlanStep(const ResolvedPolicy& p, const PolicyLayout& l, PolicyState s,
                                 int32_t t, int32_t* write_slot, int32_t* attended) {
  const int32_t n = PlanStepState(p, l, s, t, write_slot);
  for (int32_t i = 0; i < n; ++i) attended[i] = AttendedSlot(p, l, s, t, i);
  return n;
}

// Diagonal*: a selection step chooses among the attended entries [first, count)
// with first = DiagonalSelectionFirst(p): the sinks come first in PlanStep's
// list, and at every step where ObserveNeeded holds count - (attended lags)
// equals n_sink (engine/sparse/tests/policy_test.cc checks it).
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

// Diagonal*: applies step t's selection: attended entry `entry` (an index into
// PlanStep's list of `count` entries, chosen by the argmin) joins the skip set;
// its lag is skipped from step t + 1 on. No-op unless ObserveNeeded(t) holds
// and `entry` is one of the non-sink entries. ObserveStep calls it; a backend
// that computes the argmin elsewhere (the CUDA attention kernel) calls it directly.
ARGEN_SPARSE_HD void ApplyDiagonalSelection(const ResolvedPolicy& p, const PolicyLayout& l, PolicyState s,
                                            int32_t t, int32_t count, int32_t entry) {
  using namespace policy_detail;
  if (!IsDiagonal(p.kind) || !ObserveNeeded(p, l, s, t)) return;
  int32_t* lags = s.ints + l.off_lags;
  const int32_t n_lags = s.ints[kStateLagCount];
  const int32_t first = count - n_lags;  // sinks come first
  if (n_lags <= 0 || first < 0 || entry < first || entry >= count) return;
  const int32_t lag_index = n_lags - 1 - (entry - first);
  const int32_t lag = lags[lag_index];
  for (int32_t i = lag_index; i + 1 < n_lags; ++i) lags[i] = lags[i + 1];
  s.ints[kStateLagCount] = n_lags - 1;
  s.ints[l.off_skips + s.ints[kStateSkipCount]] = lag;
  s.ints[kStateSkipCount] += 1;
}

ARGEN_SPARSE_HD void ObserveStep(const ResolvedPolicy& p, const PolicyLayout& l, PolicyState s,
                                 int32_t t, const int32_t* attended, const float* probs,
                                 int32_t count) {
  using namespace policy_detail;
  switch (p.kind) {
    case PolicyKind::kH2O:
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
    case PolicyKind::kDiagonalSink4: {
      if (!ObserveNeeded(p, l, s, t)) return;
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
