// Decode attention (dense and sparse), split-K partial softmax and its combine,
// and the staged kernel for short key sets (see below).
//
// One block of 128 threads per (token, kv_head, split). A key is handled by
// head_dim/8 lanes holding 8 dims each (16-byte loads; fp8 rows: 16 codes a
// lane where G <= 2), so a block walks 128/(head_dim/8) keys at a time; the G
// query heads sharing the kv head reuse each loaded key. Scores live in shared
// memory between the two passes. The warp kernel runs the same key loops with
// one warp per (token, kv_head). With four query heads a KV head of 128 dims
// and bf16 rows (Emu3-Gen) the two-pass kernel's key loops are tensor-core
// MMAs instead (kernels/attention_mma.cuh).
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <type_traits>

#include "kernels/attention.h"
#include "kernels/attention_mma.cuh"
#include "kernels/common.cuh"
#include "kernels/kv_fp8.h"
#include "kernels/pdl.cuh"

namespace argen::kernels {
namespace {

using bf16 = __nv_bfloat16;
constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kUnroll = 4;  // independent 16-byte loads in flight per thread

struct WorkspaceView {
  float* m;       // [tokens][heads][splits]
  float* l;       // [tokens][heads][splits]
  float* acc;     // [tokens][heads][splits][head_dim]
  float* logits;  // [tokens][heads][probs_stride] (probs requested and splits > 1)
};

__host__ __device__ inline WorkspaceView View(void* ws, int tokens, int heads, int head_dim, int splits) {
  WorkspaceView v;
  float* f = static_cast<float*>(ws);
  const int64_t part = static_cast<int64_t>(tokens) * heads * splits;
  v.m = f;
  v.l = f + part;
  v.acc = f + 2 * part;
  v.logits = v.acc + part * head_dim;
  return v;
}

// One query head's softmax over scores[0, len): scores become exp(s - max)
// (0 everywhere when every score is -inf); returns (max, sum of exp). The
// callers' threads first, first + step, ... cover the row; reduce_max and
// reduce_sum combine over exactly those threads (a warp or the block).
template <typename ReduceMax, typename ReduceSum>
__device__ __forceinline__ float2 ExpScores(float* scores, int len, int first, int step, ReduceMax reduce_max,
                                            ReduceSum reduce_sum) {
  float mx = -INFINITY;
  for (int j = first; j < len; j += step) mx = fmaxf(mx, scores[j]);
  mx = reduce_max(mx);
  float sum = 0.f;
  for (int j = first; j < len; j += step) {
    const float p = (mx == -INFINITY) ? 0.f : __expf(scores[j] - mx);
    scores[j] = p;
    sum += p;
  }
  return make_float2(mx, reduce_sum(sum));
}

// The same over one warp's lanes, and over the block (`scratch`: a float per warp).
__device__ __forceinline__ float2 WarpExpScores(float* scores, int len, int lane) {
  return ExpScores(
      scores, len, lane, 32, [](float v) { return detail::WarpMax(v); }, [](float v) { return detail::WarpSum(v); });
}
__device__ __forceinline__ float2 BlockExpScores(float* scores, int len, float* scratch) {
  return ExpScores(
      scores, len, static_cast<int>(threadIdx.x), static_cast<int>(blockDim.x),
      [scratch](float v) { return detail::BlockMax(v, scratch); },
      [scratch](float v) { return detail::BlockSum(v, scratch); });
}

// Virtual position (kernels/token_meta.h) of decode slot `slot`, or -1 when it
// is out of the row's region. Without kShared a row holds its whole prompt (the
// launch has no sharing row) and virtual positions are region positions.
template <bool kShared>
__device__ __forceinline__ int SlotPosition(int slot, const TokenMeta& m) {
  const int pos = m.decode_base + slot;
  if (pos < 0 || pos >= m.capacity) return -1;
  return kShared ? m.shared_prompt + pos : pos;
}
// The same for key j: prompt keys first, then decode entry j - prefix_len's slot.
template <bool kShared>
__device__ __forceinline__ int KeyPosition(int j, const TokenMeta& m, const int32_t* idx) {
  if (j < m.prefix_len) return j;
  const int e = j - m.prefix_len;
  return SlotPosition<kShared>(idx ? idx[e] : e, m);
}

// The decode slots a (token, kv head) attends: its policy's list (sparse),
// its own list shared by every layer and head (kTokenListed), or none (slots
// [0, decode_count)).
__device__ __forceinline__ const int32_t* DecodeSlots(const AttentionArgs& a, const TokenMeta& m, bool sparse, int t,
                                                      int kvh) {
  if (sparse) return a.decode_idx + (static_cast<int64_t>(t) * a.kv_heads + kvh) * a.idx_stride;
  if ((m.flags & kTokenListed) != 0 && a.token_lists != nullptr) return a.token_lists + m.list_offset;
  return nullptr;
}

// Where a (token, kv head)'s K and V rows are, in bf16 or in fp8 (kernels/kv_fp8.h),
// and how one lane's Dims values of a row are loaded (16 bytes for bf16) and unpacked.
template <int HD, bool kFp8, int Dims, bool kShared>
struct KvRows;

// One region (kShared false: the row holds its whole prompt).
template <int HD>
struct KvRows<HD, false, 8, false> {  // 8 values: one 16-byte load
  using Raw = detail::Bf16x8;
  const bf16* k;
  const bf16* v;
  __device__ KvRows(const AttentionArgs& a, const TokenMeta& m, int kvh) {
    const int64_t layer_stride = static_cast<int64_t>(a.kv_heads) * m.capacity * HD;
    k = a.kv_pool + m.kv_offset + a.layer * layer_stride + static_cast<int64_t>(kvh) * m.capacity * HD;
    v = k + static_cast<int64_t>(a.num_layers) * layer_stride;
  }
  __device__ const bf16* KRow(int pos) const { return k + static_cast<int64_t>(pos) * HD; }
  __device__ const bf16* VRow(int pos) const { return v + static_cast<int64_t>(pos) * HD; }
  __device__ Raw LoadK(int pos, int sub) const { return detail::Load8(KRow(pos) + sub * 8); }
  __device__ Raw LoadV(int pos, int sub) const { return detail::Load8(VRow(pos) + sub * 8); }
  __device__ float KScale(int) const { return 1.f; }
  __device__ float VScale(int) const { return 1.f; }
  __device__ static void Unpack(const Raw& r, float out[8]) { detail::Unpack8(r, out); }
};

// Two regions: virtual positions below shared_prompt in the prompt owner's.
template <int HD>
struct KvRows<HD, false, 8, true> {
  using Raw = detail::Bf16x8;
  const bf16 *k, *v;    // the row's own region at (layer, kvh)
  const bf16 *pk, *pv;  // the prompt owner's (shared_prompt > 0)
  int shared;
  __device__ static void Bases(const AttentionArgs& a, int64_t offset, int capacity, int kvh, const bf16** k,
                               const bf16** v) {
    const int64_t layer_stride = static_cast<int64_t>(a.kv_heads) * capacity * HD;
    *k = a.kv_pool + offset + a.layer * layer_stride + static_cast<int64_t>(kvh) * capacity * HD;
    *v = *k + static_cast<int64_t>(a.num_layers) * layer_stride;
  }
  __device__ KvRows(const AttentionArgs& a, const TokenMeta& m, int kvh) : shared(m.shared_prompt) {
    Bases(a, m.kv_offset, m.capacity, kvh, &k, &v);
    pk = k;
    pv = v;
    if (shared > 0) Bases(a, m.prompt_kv_offset, m.prompt_capacity, kvh, &pk, &pv);
  }
  // The K (V) row of virtual position pos.
  __device__ const bf16* KRow(int pos) const {
    return pos < shared ? pk + static_cast<int64_t>(pos) * HD : k + static_cast<int64_t>(pos - shared) * HD;
  }
  __device__ const bf16* VRow(int pos) const {
    return pos < shared ? pv + static_cast<int64_t>(pos) * HD : v + static_cast<int64_t>(pos - shared) * HD;
  }
  __device__ Raw LoadK(int pos, int sub) const { return detail::Load8(KRow(pos) + sub * 8); }
  __device__ Raw LoadV(int pos, int sub) const { return detail::Load8(VRow(pos) + sub * 8); }
  __device__ float KScale(int) const { return 1.f; }
  __device__ float VScale(int) const { return 1.f; }
  __device__ static void Unpack(const Raw& r, float out[8]) { detail::Unpack8(r, out); }
};

// fp8 rows: 16 codes (one 16-byte load, as bf16's 8 values) per lane where the
// registers allow (G <= 2: q and acc are G x 16 floats), so a key takes half
// the lanes and half the shuffles of a bf16 key; 8 codes per lane otherwise.
template <int HD, int Dims>
struct Fp8Raw;
template <int HD>
struct Fp8Raw<HD, 16> {
  using Type = uint4;
};
template <int HD>
struct Fp8Raw<HD, 8> {
  using Type = uint2;
};

template <int HD, int Dims, bool kSharedPrompt>
struct KvRows<HD, true, Dims, kSharedPrompt> {
  static constexpr int kDims = Dims;
  static constexpr bool kShared = kSharedPrompt;
  using Raw = typename Fp8Raw<HD, Dims>::Type;
  // One region's codes and scales at (layer, kvh), indexed by region position.
  struct Region {
    const unsigned char* k;
    const unsigned char* v;
    const float* k_scale;
    const float* v_scale;
    __device__ Region(const AttentionArgs& a, int64_t offset, int capacity, int kvh) {
      const unsigned char* region = reinterpret_cast<const unsigned char*>(a.kv_pool + offset);
      const Fp8KvRegion r = Fp8Region(a.num_layers, a.kv_heads, capacity, HD);
      const int64_t first = (static_cast<int64_t>(a.layer) * a.kv_heads + kvh) * capacity;  // vector of position 0
      k = region + first * HD;
      v = region + r.v_codes + first * HD;
      k_scale = reinterpret_cast<const float*>(region + r.k_scales) + first;
      v_scale = reinterpret_cast<const float*>(region + r.v_scales) + first;
    }
  };
  Region own, prompt;  // prompt: the owner's (kShared and shared_prompt > 0), else own
  int shared;
  __device__ KvRows(const AttentionArgs& a, const TokenMeta& m, int kvh)
      : own(a, m.kv_offset, m.capacity, kvh),
        prompt(kShared && m.shared_prompt > 0 ? Region(a, m.prompt_kv_offset, m.prompt_capacity, kvh) : own),
        shared(kShared ? m.shared_prompt : 0) {}
  __device__ const Region& At(int pos) const { return kShared && pos < shared ? prompt : own; }
  __device__ int Local(int pos) const { return kShared && pos < shared ? pos : pos - shared; }
  __device__ Raw LoadK(int pos, int sub) const {
    return *reinterpret_cast<const Raw*>(At(pos).k + static_cast<int64_t>(Local(pos)) * HD + sub * kDims);
  }
  __device__ Raw LoadV(int pos, int sub) const {
    return *reinterpret_cast<const Raw*>(At(pos).v + static_cast<int64_t>(Local(pos)) * HD + sub * kDims);
  }
  __device__ float KScale(int pos) const { return At(pos).k_scale[Local(pos)]; }
  __device__ float VScale(int pos) const { return At(pos).v_scale[Local(pos)]; }
  __device__ static void UnpackWord(unsigned word, float* out) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const __half2_raw raw =
          __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>((word >> (16 * h)) & 0xffffu), __NV_E4M3);
      const float2 f = __half22float2(__half2(raw));
      out[2 * h] = f.x;
      out[2 * h + 1] = f.y;
    }
  }
  __device__ static void Unpack(const uint2& r, float out[8]) {
    UnpackWord(r.x, out);
    UnpackWord(r.y, out + 4);
  }
  __device__ static void Unpack(const uint4& r, float out[16]) {
    UnpackWord(r.x, out);
    UnpackWord(r.y, out + 4);
    UnpackWord(r.z, out + 8);
    UnpackWord(r.w, out + 12);
  }
};

struct MinEntry {
  float v;
  int e;
};

__device__ __forceinline__ MinEntry Smaller(MinEntry a, MinEntry b) {
  return (b.v < a.v || (b.v == a.v && b.e < a.e)) ? b : a;
}

// Warp-wide argmin; returns the winning entry to every lane.
__device__ __forceinline__ MinEntry WarpArgmin(MinEntry x) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    MinEntry y;
    y.v = __shfl_xor_sync(0xffffffffu, x.v, o);
    y.e = __shfl_xor_sync(0xffffffffu, x.e, o);
    x = Smaller(x, y);
  }
  return x;
}

// Block-wide argmin (`scratch`: an entry per warp); returns the winning entry to every thread.
__device__ MinEntry BlockArgmin(MinEntry x, MinEntry* scratch) {
  x = WarpArgmin(x);
  __syncthreads();
  if ((threadIdx.x & 31) == 0) scratch[threadIdx.x >> 5] = x;
  __syncthreads();
  MinEntry best = scratch[0];
  for (int w = 1; w < static_cast<int>(blockDim.x >> 5); ++w) best = Smaller(best, scratch[w]);
  return best;
}

// Which observe outputs a (token, kv_head) writes; uniform over a block.
struct ObserveMode {
  bool probs = false, argmin = false;
  int from = 0;
  __device__ bool any() const { return probs || argmin; }
};

__device__ __forceinline__ ObserveMode ModeFor(const AttentionArgs& a, int t, bool sparse, int count) {
  ObserveMode o;
  if (!sparse || a.probs_stride <= 0 || count > a.probs_stride) return o;
  if (a.observe != nullptr) {
    const int v = a.observe[t];
    if (v >= 0) {
      o.argmin = a.argmin != nullptr;
      o.from = v;
    } else if (v == kObserveProbs) {
      o.probs = a.probs != nullptr;
    }
  } else {
    o.probs = a.probs != nullptr;
    o.argmin = a.argmin != nullptr;
    o.from = a.argmin_from;
  }
  return o;
}

// Writes probs[e] = prob(e) and/or the argmin over [from, count). Every thread
// of the block calls it (block-wide reduction); p(e) is computed once per entry
// and serves both outputs, so the argmin is exactly that of the probs.
template <typename ProbOf>
__device__ __forceinline__ void WriteObserve(const AttentionArgs& a, int t, int kvh, int count, const ObserveMode& o,
                                             ProbOf prob_of, MinEntry* scratch) {
  if (!o.any()) return;
  const int64_t head = static_cast<int64_t>(t) * a.kv_heads + kvh;
  float* probs = o.probs ? a.probs + head * a.probs_stride : nullptr;
  const int from = o.argmin ? max(o.from, 0) : count;
  const int begin = probs != nullptr ? 0 : from;
  MinEntry best{INFINITY, -1};
  for (int e = begin + static_cast<int>(threadIdx.x); e < count; e += static_cast<int>(blockDim.x)) {
    const float p = prob_of(e);
    if (probs != nullptr) probs[e] = p;
    if (e >= from) best = Smaller(best, MinEntry{p, e});
  }
  if (!o.argmin) return;
  best = BlockArgmin(best, scratch);
  if (threadIdx.x == 0) a.argmin[head] = best.e;
}

// Positions of entries [0, len) (keys begin + j) into positions[j]: -1 for a
// slot outside the row's region. Thread `tid` of `threads` (a block or a
// warp) writes every threads-th; the caller syncs before the key loops read
// them, so those loops issue their K and V loads without first waiting on a
// slot list's global load.
template <bool kShared>
__device__ __forceinline__ void StagePositions(const TokenMeta& m, const int32_t* idx, int begin, int len,
                                               int* positions, int tid, int threads) {
  for (int j = tid; j < len; j += threads) positions[j] = KeyPosition<kShared>(begin + j, m, idx);
}

// A thread's first kEntries entries (tid, tid + kBlockThreads, ...) of its
// (token, kv head)'s policy slot list, read before the token's metadata has
// arrived (the list's address does not depend on it), so that the block's
// prologue waits one round trip for all three, not one for the metadata, then
// one for the head's count and then one for the list. Entries past idx_stride read 0.
template <int kBlockThreads>
struct SlotPrefetch {
  static constexpr int kEntries = (512 + kBlockThreads - 1) / kBlockThreads;
  int32_t slot[kEntries];
  int32_t count;  // the head's count (counts and lists given), whether the token is sparse or not
  __device__ SlotPrefetch(const AttentionArgs& a, int t, int kvh) {
    const bool listed = a.counts != nullptr && a.decode_idx != nullptr;
    count = listed ? a.counts[static_cast<int64_t>(t) * a.kv_heads + kvh] : 0;
    const int32_t* list =
        a.decode_idx != nullptr ? a.decode_idx + (static_cast<int64_t>(t) * a.kv_heads + kvh) * a.idx_stride : nullptr;
#pragma unroll
    for (int k = 0; k < kEntries; ++k) {
      const int e = static_cast<int>(threadIdx.x) + k * kBlockThreads;
      slot[k] = list != nullptr && e < a.idx_stride ? list[e] : 0;
    }
  }
};

// What blocks that do not prefetch hold instead (SlotPrefetch below is for
// the 256-thread one-wave launches only: in 128-thread blocks its registers
// cost Emu3's 64-image launch blocks an SM, 1.05x slower, 2026-12-04).
struct NoSlotPrefetch {
  __device__ NoSlotPrefetch(const AttentionArgs&, int, int) {}
};

// StagePositions for a block of kBlockThreads whose slot list (when `sparse`:
// the policy's, idx) starts in `prefetched`: the chunk's prompt keys, then its
// decode entries e = tid, tid + kBlockThreads, ... (positions[prefix_len + e - begin]).
template <bool kShared, int kBlockThreads>
__device__ __forceinline__ void StagePrefetchedPositions(const TokenMeta& m, const int32_t* idx, bool sparse,
                                                         const SlotPrefetch<kBlockThreads>& prefetched, int begin,
                                                         int len, int* positions) {
  const int tid = threadIdx.x;
  for (int j = tid; j < min(len, m.prefix_len - begin); j += kBlockThreads) positions[j] = begin + j;
  const int e0 = max(0, begin - m.prefix_len), e1 = begin + len - m.prefix_len;
  const auto stage = [&](int e, int slot) {
    if (e >= e0 && e < e1) positions[m.prefix_len + e - begin] = SlotPosition<kShared>(slot, m);
  };
#pragma unroll
  for (int k = 0; k < SlotPrefetch<kBlockThreads>::kEntries; ++k) {
    const int e = tid + k * kBlockThreads;
    if (e < e1) stage(e, sparse ? prefetched.slot[k] : (idx != nullptr ? idx[e] : e));
  }
  for (int e = tid + SlotPrefetch<kBlockThreads>::kEntries * kBlockThreads; e < e1; e += kBlockThreads)
    stage(e, idx != nullptr ? idx[e] : e);
}

// Whether a query group's key loops are pipelined (see the loops below). With
// 4-8 query heads a key's dot products and shuffles take about as long as its
// load, and without the overlap Emu3's group-4 dense launch ran at about half
// the copy rate; pipelined, Emu3 and NextStep-1 ran 1.05-1.40x faster dense
// and 1.09-1.36x sparse (H200, 2026-12-03, docs/PERFORMANCE.md). With one head
// a KV head the loop is its loads, and the pipelined form was 0.78-0.90x on
// Janus-Pro-7B's short sparse sets: those keep the plain loop.
template <int G>
inline constexpr bool kPipelinedGroup = G >= 4;

// The two key loops both kernels share. A key group of kLanesPerKey lanes
// (kDims dims each) holds one key; `slot` numbers the groups of the threads
// taking part, kKeysPerIter of them; a round is kUnroll keys of each group.
//
// Plain (kPipelined false): each round's positions (KeyPosition, the slot
// list read in line) and loads, then its arithmetic; ScoreKeys writes
// positions[j] for AccumulateValues. Pipelined: the positions were staged
// (StagePositions) and round r + 1's loads are issued before round r's
// arithmetic, two register buffers alternating.
template <typename Rows, int kKeysPerIter, bool kFp8>
struct KeyRound {
  typename Rows::Raw raw[kUnroll];
  float scale[kUnroll];
  int pos[kUnroll];
  // Round `base`'s rows at positions pos[] (-1: no row, zeros): K or (values) V.
  __device__ __forceinline__ void LoadRows(const Rows& rows, int sub, bool values) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      raw[u] = typename Rows::Raw{};
      scale[u] = 0.f;
      if (pos[u] >= 0) {
        raw[u] = values ? rows.LoadV(pos[u], sub) : rows.LoadK(pos[u], sub);
        if constexpr (kFp8) scale[u] = values ? rows.VScale(pos[u]) : rows.KScale(pos[u]);
      }
    }
  }
  // Positions from staged positions[] (entries at or past len: -1).
  __device__ __forceinline__ void Staged(const int* positions, int base, int len, int slot) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = base + u * kKeysPerIter + slot;
      pos[u] = j < len ? positions[j] : -1;
    }
  }
};

// Runs compute(round, base) over the rounds base = 0, step, ... < len with
// load(round, base) before: in line (plain) or a round ahead, two Round
// buffers alternating (unrolled by two: no register copies between them).
// Pipelined, `first` (when given) is round 0 already loaded by the caller.
template <bool kPipelined, typename Round, typename LoadFn, typename ComputeFn>
__device__ __forceinline__ void KeyRounds(int len, int step, LoadFn load, ComputeFn compute,
                                          const Round* first = nullptr) {
  if constexpr (!kPipelined) {
    for (int base = 0; base < len; base += step) {
      Round r;
      load(r, base);
      compute(r, base);
    }
  } else {
    Round a, b;
    if (first != nullptr) {
      a = *first;
    } else {
      load(a, 0);
    }
    for (int base = 0; base < len;) {
      load(b, base + step);
      compute(a, base);
      base += step;
      if (base >= len) break;
      load(a, base + step);
      compute(b, base);
      base += step;
    }
  }
}

// Sums v[] over the kLanes lanes of a key group (lane `sub` of it) and leaves
// each lane a share of the totals: v[0, kN / kLanes) become the totals of
// entries [sub * kN / kLanes, (sub + 1) * kN / kLanes). Recursive halving: a
// step sends half of what a lane holds and keeps the other half, so kN
// entries take kN - kN / kLanes shuffles, where a butterfly per entry takes
// kN * log2(kLanes).
template <int kN, int kLanes, int kOffset = kLanes / 2>
__device__ __forceinline__ void ReduceScatter(float (&v)[kN], int sub) {
  static_assert(kN % kLanes == 0, "the entries fill whole lane shares");
  // Step kOffset acts on the first kHalf * 2 entries (what the steps before left).
  constexpr int kHalf = kN / kLanes * kOffset;
  const bool upper = (sub & kOffset) != 0;
#pragma unroll
  for (int i = 0; i < kHalf; ++i) {
    const float send = upper ? v[i] : v[i + kHalf];
    const float keep = upper ? v[i + kHalf] : v[i];
    v[i] = keep + __shfl_xor_sync(0xffffffffu, send, kOffset);
  }
  if constexpr (kOffset > 1) ReduceScatter<kN, kLanes, kOffset / 2>(v, sub);
}

// The value of arr[u] for a run-time u, without indexing a register array
// with it (that would put the array in local memory).
template <typename T, int N>
__device__ __forceinline__ T Pick(const T (&arr)[N], int u) {
  T x = arr[0];
#pragma unroll
  for (int k = 1; k < N; ++k)
    if (u == k) x = arr[k];
  return x;
}

// A round's partial dot products, this lane's kDims dims of each: part[u * G +
// g] = q_g . k_u (zeros for an entry without a row; fp8 rows scaled, the scale
// being the same for every lane of the key).
template <int G, int kDims, bool kFp8, typename Rows, typename Round, int N>
__device__ __forceinline__ void RoundDots(const Round& r, const float (&q)[G][kDims], float (&part)[N]) {
  static_assert(N >= kUnroll * G, "a value per (key, query head)");
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) {
    float k[kDims];
    Rows::Unpack(r.raw[u], k);
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float s = 0.f;
#pragma unroll
      for (int i = 0; i < kDims; ++i) s += q[g][i] * k[i];
      if constexpr (kFp8) s *= r.scale[u];
      part[u * G + g] = s;
    }
  }
}

// A round's whole dot products on every lane of each key group: s[u * G + g] =
// q_g . k_u. With at least a value a lane, ReduceScatter then one shuffle a
// value from its owner (31 shuffles at G = 4 over 16 lanes against a
// butterfly's 64); with fewer, a butterfly per value.
template <int G, int kDims, int kLanesPerKey, bool kFp8, typename Rows, typename Round>
__device__ __forceinline__ void KeyGroupDots(const Round& r, const float (&q)[G][kDims], int sub,
                                             float (&s)[kUnroll * G]) {
  constexpr int kValues = kUnroll * G;
  if constexpr (kValues >= kLanesPerKey) {
    constexpr int kShare = (kValues + kLanesPerKey - 1) / kLanesPerKey;
    float part[kShare * kLanesPerKey];
    RoundDots<G, kDims, kFp8, Rows>(r, q, part);
#pragma unroll
    for (int e = kValues; e < kShare * kLanesPerKey; ++e) part[e] = 0.f;
    ReduceScatter<kShare * kLanesPerKey, kLanesPerKey>(part, sub);
#pragma unroll
    for (int e = 0; e < kValues; ++e) s[e] = __shfl_sync(0xffffffffu, part[e % kShare], e / kShare, kLanesPerKey);
  } else {
    RoundDots<G, kDims, kFp8, Rows>(r, q, s);
#pragma unroll
    for (int e = 0; e < kValues; ++e)
#pragma unroll
      for (int o = kLanesPerKey / 2; o > 0; o >>= 1) s[e] += __shfl_xor_sync(0xffffffffu, s[e], o);
  }
}

// Whether a query group's scores are summed with ReduceScatter (all of a
// round's kUnroll x G dot products at once) rather than one butterfly per dot
// product: with 4+ query heads a round's butterflies were most of its
// instructions (64 shuffles a round at G = 4 over 16 lanes, against 15).
// With the softmax a warp a head and V's first round issued before it, Emu3's
// and NextStep-1's launches ran 1.30-1.42x faster dense and 1.24-1.53x
// sparse (H200, 2026-12-03, docs/PERFORMANCE.md).
template <int G>
inline constexpr bool kScatteredScores = kPipelinedGroup<G>;

// Scores: scores[g * stride + j] = q_g . k_j (scaled: -inf for a key outside the
// region), written by one lane of the key group; on_logit(g, j, logit) sees each
// score there too. Entries j in [0, len) are keys begin + j.
template <int G, int kDims, int kLanesPerKey, int kKeysPerIter, bool kFp8, bool kShared, typename Rows,
          typename OnLogit>
__device__ __forceinline__ void ScoreKeys(const Rows& rows, const TokenMeta& m, const int32_t* idx, int begin, int len,
                                          int* positions, const float (&q)[G][kDims], int sub, int slot, float* scores,
                                          int stride, OnLogit on_logit) {
  constexpr bool kPipelined = kPipelinedGroup<G>;
  using Round = KeyRound<Rows, kKeysPerIter, kFp8>;
  KeyRounds<kPipelined, Round>(
      len, kKeysPerIter * kUnroll,
      [&](Round& r, int base) {
        if constexpr (kPipelined) {
          r.Staged(positions, base, len, slot);
        } else {
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) {
            const int j = base + u * kKeysPerIter + slot;
            r.pos[u] = j < len ? KeyPosition<kShared>(begin + j, m, idx) : -1;
            if (sub == 0 && j < len) positions[j] = r.pos[u];
          }
        }
        r.LoadRows(rows, sub, false);
      },
      [&](const Round& r, int base) {
        if constexpr (kScatteredScores<G>) {
          // Partial dot products of the round (entry u * G + g, zero padding
          // to whole lane shares), summed and spread over the key group's lanes.
          constexpr int kValues = kUnroll * G;
          constexpr int kShare = (kValues + kLanesPerKey - 1) / kLanesPerKey;
          float part[kShare * kLanesPerKey];
          RoundDots<G, kDims, kFp8, Rows>(r, q, part);
#pragma unroll
          for (int e = kValues; e < kShare * kLanesPerKey; ++e) part[e] = 0.f;
          ReduceScatter<kShare * kLanesPerKey, kLanesPerKey>(part, sub);
#pragma unroll
          for (int i = 0; i < kShare; ++i) {
            const int e = sub * kShare + i;
            if (e >= kValues) continue;
            const int u = e / G, g = e % G;
            const int j = base + u * kKeysPerIter + slot;
            if (j < len) {
              const float logit = Pick(r.pos, u) >= 0 ? part[i] : -INFINITY;
              scores[g * stride + j] = logit;
              on_logit(g, j, logit);
            }
          }
        } else {
#pragma unroll
          for (int u = 0; u < kUnroll; ++u) {
            float k[kDims];
            Rows::Unpack(r.raw[u], k);  // zeros for an entry without a row
            const int j = base + u * kKeysPerIter + slot;
#pragma unroll
            for (int g = 0; g < G; ++g) {
              float s = 0.f;
#pragma unroll
              for (int i = 0; i < kDims; ++i) s += q[g][i] * k[i];
#pragma unroll
              for (int o = kLanesPerKey / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
              if constexpr (kFp8) s *= r.scale[u];
              if (sub == 0 && j < len) {
                const float logit = r.pos[u] >= 0 ? s : -INFINITY;
                scores[g * stride + j] = logit;
                on_logit(g, j, logit);
              }
            }
          }
        }
      });
}

// Values: acc[g] = sum of p_g(j) v_j over the entries of this warp's key groups
// (p from scores, which hold exp(s - max) by then; fp8 rows fold in the value's
// scale), summed over the warp's key slots: every lane of a sub holds the total.
template <int G, int kDims, int kLanesPerKey, int kKeysPerIter, bool kFp8, typename Rows>
__device__ __forceinline__ void AccumulateValues(const Rows& rows, int len, const float* scores, int stride,
                                                 const int* positions, int sub, int slot, float (&acc)[G][kDims],
                                                 const KeyRound<Rows, kKeysPerIter, kFp8>* first = nullptr) {
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int i = 0; i < kDims; ++i) acc[g][i] = 0.f;
  using Round = KeyRound<Rows, kKeysPerIter, kFp8>;
  KeyRounds<kPipelinedGroup<G>, Round>(
      len, kKeysPerIter * kUnroll,
      [&](Round& r, int base) {
        r.Staged(positions, base, len, slot);
        r.LoadRows(rows, sub, true);
      },
      [&](const Round& r, int base) {
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          if (r.pos[u] < 0) continue;
          const int j = base + u * kKeysPerIter + slot;
          float v[kDims];
          Rows::Unpack(r.raw[u], v);
#pragma unroll
          for (int g = 0; g < G; ++g) {
            float p = scores[g * stride + j];
            if constexpr (kFp8) p *= r.scale[u];
#pragma unroll
            for (int i = 0; i < kDims; ++i) acc[g][i] += p * v[i];
          }
        }
      },
      first);
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int i = 0; i < kDims; ++i)
#pragma unroll
      for (int o = 16; o >= kLanesPerKey; o >>= 1) acc[g][i] += __shfl_xor_sync(0xffffffffu, acc[g][i], o);
}

// Merges the split partial softmaxes of one (token, kv_head): output, probs,
// argmin. Every thread of the block calls it. The partials are read with
// __ldcg (L2): in the fused form other blocks of the same launch wrote them.
template <int HD, int G>
__device__ __forceinline__ void CombineSplits(const AttentionArgs& a, int t, int kvh, float* s_m, float* s_l,
                                              MinEntry* min_scratch) {
  const int tid = threadIdx.x;
  WorkspaceView ws = View(a.workspace, a.tokens, a.heads, HD, a.splits);
  if (tid < G) {
    const int64_t base = (static_cast<int64_t>(t) * a.heads + kvh * G + tid) * a.splits;
    float mx = -INFINITY;
    for (int s = 0; s < a.splits; ++s) mx = fmaxf(mx, __ldcg(ws.m + base + s));
    float l = 0.f;
    if (mx != -INFINITY)
      for (int s = 0; s < a.splits; ++s) l += __ldcg(ws.l + base + s) * __expf(__ldcg(ws.m + base + s) - mx);
    s_m[tid] = mx;
    s_l[tid] = l;
  }
  __syncthreads();
  for (int e = tid; e < G * HD; e += static_cast<int>(blockDim.x)) {
    const int g = e / HD, d = e % HD;
    const int h = kvh * G + g;
    const int64_t base = (static_cast<int64_t>(t) * a.heads + h) * a.splits;
    float total = 0.f;
    if (s_m[g] != -INFINITY)
      for (int s = 0; s < a.splits; ++s)
        total += __ldcg(ws.acc + (base + s) * HD + d) * __expf(__ldcg(ws.m + base + s) - s_m[g]);
    a.out[(static_cast<int64_t>(t) * a.heads + h) * HD + d] = __float2bfloat16(s_l[g] > 0.f ? total / s_l[g] : 0.f);
  }
  TokenMeta m = a.meta[t];
  const bool sparse = (m.flags & kTokenSparse) && a.decode_idx != nullptr;
  if (sparse && a.counts != nullptr) m.decode_count = a.counts[static_cast<int64_t>(t) * a.kv_heads + kvh];
  m.decode_count = max(m.decode_count, 0);
  const ObserveMode observe = ModeFor(a, t, sparse, m.decode_count);
  WriteObserve(
      a, t, kvh, m.decode_count, observe,
      [&](int e) {
        float p = 0.f;
#pragma unroll
        for (int g = 0; g < G; ++g) {
          const float logit =
              __ldcg(ws.logits + (static_cast<int64_t>(t) * a.heads + kvh * G + g) * a.probs_stride + e);
          p += (s_l[g] > 0.f && logit != -INFINITY) ? __expf(logit - s_m[g]) / s_l[g] : 0.f;
        }
        return p * (1.f / G);
      },
      min_scratch);
}

// What a (token, kv head, split) block attends: the token's metadata with its
// head's own count (sparse lists), whether its slots are a policy's list, and
// its chunk: keys [begin, begin + len).
struct ChunkKeys {
  TokenMeta m;
  bool sparse;
  int begin, len;
  __device__ ChunkKeys(const AttentionArgs& a, int t, int kvh, int split) : m(a.meta[t]) {
    sparse = (m.flags & kTokenSparse) && a.decode_idx != nullptr;
    if (sparse && a.counts != nullptr) m.decode_count = a.counts[static_cast<int64_t>(t) * a.kv_heads + kvh];
    Bound(a, split);
  }
  // The same with the head's count read before the metadata arrived
  // (SlotPrefetch::count), so that the two loads are in flight together.
  struct ReadCount {
    int32_t value;
  };
  __device__ ChunkKeys(const AttentionArgs& a, int t, int split, ReadCount head_count) : m(a.meta[t]) {
    sparse = (m.flags & kTokenSparse) && a.decode_idx != nullptr;
    if (sparse && a.counts != nullptr) m.decode_count = head_count.value;
    Bound(a, split);
  }
  __device__ void Bound(const AttentionArgs& a, int split) {
    m.decode_count = max(m.decode_count, 0);
    const int n = m.prefix_len + m.decode_count;
    begin = split * a.chunk;
    len = max(0, min(n, begin + a.chunk) - begin);
  }
  // Whether the token is this launch's (a launch per KV format: fp8 or bf16).
  __device__ bool InLaunch(bool fp8) const { return ((m.flags & kTokenKvFp8) != 0) == fp8; }
};

// The chunked kernels' dynamic shared memory (SharedBytes): [G][chunk] floats
// (scores, or the one-pass kernel's logits), [chunk] key positions and the
// cross-warp sums [kWarps][G][HD].
template <int G>
struct ChunkShared {
  float* scores;
  int* positions;
  float* reduce;
  __device__ ChunkShared(float* smem, int chunk)
      : scores(smem), positions(reinterpret_cast<int*>(smem + G * chunk)), reduce(smem + (G + 1) * chunk) {}
};

// This lane's kDims dims of the kv head's G query heads, scaled.
template <int HD, int G, int kDims>
__device__ __forceinline__ void LoadQuery(const AttentionArgs& a, int t, int kvh, int sub, float (&q)[G][kDims]) {
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const float* qp = a.q + (static_cast<int64_t>(t) * a.heads + kvh * G + g) * HD + sub * kDims;
#pragma unroll
    for (int i = 0; i < kDims; ++i) q[g][i] = qp[i] * a.scale;
  }
}

// How a block's end weighs warp w's weighted values of head g: 1 when every
// warp's are on the block's max (the block's softmax), or the table
// CombineWarpSoftmax wrote, exp(m_w - m) (each warp's own softmax, WarpTileSoftmax).
struct UniformWarpScale {
  __device__ float operator()(int, int) const { return 1.f; }
};
template <int G>
struct WarpScaleTable {
  const float* scale;  // [kBlockWarps][G]
  __device__ float operator()(int w, int g) const { return scale[w * G + g]; }
};

// A block's end: reduce[kWarps][G][HD] holds each warp's weighted values (on
// the scale of s_m's maxima, times warp_scale(w, g); their sums are s_l): their total is the output
// (splits == 1) or this chunk's partial softmax; with split counters the last
// chunk of the (token, kv head) to finish merges the partials; then the
// observe outputs from prob_of(e) (split launches: CombineSplits writes them).
template <int HD, int G, int kBlockWarps = kWarps, typename ProbOf, typename WarpScale = UniformWarpScale>
__device__ __forceinline__ void FinishChunk(const AttentionArgs& a, int t, int kvh, int split, int count,
                                            const ObserveMode& observe, const float* reduce, float* s_m, float* s_l,
                                            MinEntry* min_scratch, ProbOf prob_of, WarpScale warp_scale = {}) {
  const int tid = threadIdx.x;
  WorkspaceView ws = View(a.workspace, a.tokens, a.heads, HD, a.splits);
  for (int e = tid; e < G * HD; e += kBlockWarps * 32) {
    const int g = e / HD, d = e % HD;
    float total = 0.f;
#pragma unroll
    for (int w = 0; w < kBlockWarps; ++w) total += warp_scale(w, g) * reduce[w * G * HD + e];
    const int h = kvh * G + g;
    if (a.splits == 1) {
      const float l = s_l[g];
      a.out[(static_cast<int64_t>(t) * a.heads + h) * HD + d] = __float2bfloat16(l > 0.f ? total / l : 0.f);
    } else {
      const int64_t part = (static_cast<int64_t>(t) * a.heads + h) * a.splits + split;
      ws.acc[part * HD + d] = total;
      if (d == 0) {
        ws.m[part] = s_m[g];
        ws.l[part] = s_l[g];
      }
    }
  }

  // Each block's writes are made visible (fence) before it counts itself, and
  // the last one resets the counter for the next launch.
  if (a.splits > 1) {
    if (a.split_counters == nullptr) return;
    __shared__ bool s_last;
    __threadfence();
    __syncthreads();
    if (tid == 0) {
      int* counter = a.split_counters + static_cast<int64_t>(t) * a.kv_heads + kvh;
      s_last = atomicAdd(counter, 1) == a.splits - 1;
      if (s_last) *counter = 0;
    }
    __syncthreads();
    if (!s_last) return;
    __threadfence();
    CombineSplits<HD, G>(a, t, kvh, s_m, s_l, min_scratch);
    return;
  }
  // Fused observe outputs: the whole key set is in this block.
  WriteObserve(a, t, kvh, count, observe, prob_of, min_scratch);
}

// Whether the two-pass kernel's key loops run on tensor cores
// (kernels/attention_mma.cuh): four query heads a KV head, head_dim 128, bf16 rows.
template <int HD, int G, bool kFp8>
inline constexpr bool kMmaKeys = HD == mma::kHeadDim&& G == mma::kHeads && !kFp8;
static_assert(kPipelinedGroup<mma::kHeads>, "the tensor-core loops read the staged positions");

// The tensor-core pass 1: warp `warp` of kBlockWarps scores tiles warp,
// warp + kBlockWarps, ... of the chunk's staged positions, each tile's loads
// issued a tile ahead; as ScoreKeys, scores[g * stride + j] and on_logit.
template <int kBlockWarps, typename Rows, typename OnLogit>
__device__ __forceinline__ void MmaScoreKeys(const Rows& rows, const int* positions, int len,
                                             const mma::QueryOperand& q, int warp, int lane, float* scores, int stride,
                                             OnLogit on_logit) {
  const int tiles = (len + mma::kTileKeys - 1) / mma::kTileKeys;
  KeyRounds<true, mma::KeyTile>(
      max(0, tiles - warp), kBlockWarps,
      [&](mma::KeyTile& tile, int base) { tile.Load(rows, positions, warp + base, len, lane); },
      [&](const mma::KeyTile& tile, int base) {
        mma::TileScores(tile, q, warp + base, len, lane, [&](int g, int j, float logit) {
          scores[g * stride + j] = logit;
          on_logit(g, j, logit);
        });
      });
}

// The wide tensor-core blocks' softmax, a warp at a time (kWarpSoftmax):
// pass 3 gives each warp the tiles it scored in pass 1 (warp, warp +
// kBlockWarps, ...), so a warp can weigh its values by exp(s - m_w) over its
// own tiles' max m_w and needs no other warp's scores: no block barrier
// between the passes, and all eight warps share the exps (the block's
// softmax, a warp a query head, left half of a 256-thread block idle: 2.4 of
// Emu3's 16-image launch's 22.7 us, 2026-12-04); the block's end rescales each
// warp's sums (CombineWarpSoftmax). Eight lanes a head; a key j with
// masked(g, j) scores -inf. Writes the warp's (m_w, l_w) of head g to
// warp_m / warp_l[warp * 4 + g].
template <int kBlockWarps, typename Masked>
__device__ __forceinline__ void WarpTileSoftmax(float* scores, int stride, int len, int warp, int lane, Masked masked,
                                                float* warp_m, float* warp_l) {
  static_assert(mma::kHeads * 8 == 32, "eight lanes a head");
  const int g = lane >> 3, k = lane & 7;
  float* row = scores + g * stride;
  const int tiles = (len + mma::kTileKeys - 1) / mma::kTileKeys;
  __syncwarp();  // the warp's pass 1 wrote its scores from other lanes
  float mx = -INFINITY;
  for (int tile = warp; tile < tiles; tile += kBlockWarps) {
#pragma unroll
    for (int i = k; i < mma::kTileKeys; i += 8) {
      const int j = tile * mma::kTileKeys + i;
      if (j >= len) continue;
      float s = row[j];
      if (masked(g, j)) row[j] = s = -INFINITY;
      mx = fmaxf(mx, s);
    }
  }
#pragma unroll
  for (int off = 4; off > 0; off >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  float sum = 0.f;
  for (int tile = warp; tile < tiles; tile += kBlockWarps) {
#pragma unroll
    for (int i = k; i < mma::kTileKeys; i += 8) {
      const int j = tile * mma::kTileKeys + i;
      if (j >= len) continue;
      const float p = mx == -INFINITY ? 0.f : __expf(row[j] - mx);
      row[j] = p;
      sum += p;
    }
  }
#pragma unroll
  for (int off = 4; off > 0; off >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  if (k == 0) {
    warp_m[warp * mma::kHeads + g] = mx;
    warp_l[warp * mma::kHeads + g] = sum;
  }
  __syncwarp();  // pass 3's lanes read other lanes' probabilities
}

// The block's softmax statistics from its warps' (WarpTileSoftmax), by one
// warp (lane w * 4 + g): s_m[g] the max over warps, scale[w * 4 + g] =
// exp(m_w - s_m[g]) (0 for a warp without keys), s_l[g] the rescaled sum.
template <int kBlockWarps>
__device__ __forceinline__ void CombineWarpSoftmax(const float* warp_m, const float* warp_l, int lane, float* scale,
                                                   float* s_m, float* s_l) {
  static_assert(kBlockWarps * mma::kHeads <= 32, "a lane a (warp, head)");
  const bool on = lane < kBlockWarps * mma::kHeads;
  const float mw = on ? warp_m[lane] : -INFINITY;
  float mx = mw;
#pragma unroll
  for (int off = mma::kHeads; off < 32; off <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  const float f = mw == -INFINITY ? 0.f : __expf(mw - mx);
  float l = on ? f * warp_l[lane] : 0.f;
#pragma unroll
  for (int off = mma::kHeads; off < 32; off <<= 1) l += __shfl_xor_sync(0xffffffffu, l, off);
  if (on) scale[lane] = f;
  if (lane < mma::kHeads) {
    s_m[lane] = mx;
    s_l[lane] = l;
  }
}

// The tensor-core pass 3: the warp's tiles' probability-weighted values
// (probs: exp(s - max), [4][stride]) into out[g * 128 + d]; `first` is the
// warp's first tile, loaded by the caller.
template <int kBlockWarps, typename Rows>
__device__ __forceinline__ void MmaAccumulateValues(const Rows& rows, const int* positions, int len, const float* probs,
                                                    int stride, int warp, int lane, const mma::ValueTile& first,
                                                    float* out) {
  const int tiles = (len + mma::kTileKeys - 1) / mma::kTileKeys;
  float acc[8][4];
#pragma unroll
  for (int mt = 0; mt < 8; ++mt)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[mt][e] = 0.f;
  KeyRounds<true, mma::ValueTile>(
      max(0, tiles - warp), kBlockWarps,
      [&](mma::ValueTile& tile, int base) { tile.Load(rows, positions, warp + base, len, lane); },
      [&](const mma::ValueTile& tile, int base) { mma::TileValues(tile, probs, stride, warp + base, len, lane, acc); },
      &first);
  mma::StoreValues(acc, lane, out);
}

// Blocks of kWideThreads threads: a launch of at most kWideMaxPairsPerSm
// unsplit (token, kv head) pairs an SM with 4+ query heads a KV head (Emu3's
// 16-image sparse launch: 256 pairs of 459 keys) leaves each SM two blocks of
// four warps, whose key rounds are chains of dot products and shuffles with
// too few warps to hide them; twice the warps walk a block's keys in half the
// rounds (Emu3: 0.79x the time of two splits of 128-thread blocks). Below
// kWideMinKeys a block has too few rounds for it (NextStep-1's 101 keys at 16
// images: 1.07x slower). Held to 128 registers so that two such blocks fit an SM.
constexpr int kWideThreads = 256;
constexpr int kWideMaxPairsPerSm = 2;
constexpr int kWideMinKeys = 256;
template <int kBlockThreads>
constexpr int TwoPassMinBlocks() {
  return kBlockThreads == kWideThreads ? 2 : 0;
}

// The block's phase stamps (AttentionArgs::phase_clocks), kept in shared
// memory by thread 0 and written out at the block's end. Only in builds with
// ARGEN_ATTENTION_PHASES: compiled in (and unused) they made the grouped-query
// launches 2-4% slower (their registers and shared memory; H200, 2026-12-04).
#if defined(ARGEN_ATTENTION_PHASES)
constexpr bool kPhaseStampsBuilt = true;
struct PhaseStamps {
  uint64_t* stamps;  // [phase] cycles, then [phase] ns
  bool on;
  __device__ explicit PhaseStamps(const AttentionArgs& a) : on(a.phase_clocks != nullptr) {
    __shared__ uint64_t shared[2 * kAttentionPhaseCount];
    stamps = shared;
  }
  __device__ void Mark(int phase) {
    if (!on || threadIdx.x != 0) return;
    uint64_t ns;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
    stamps[phase] = clock64();
    stamps[kAttentionPhaseCount + phase] = ns;
  }
  __device__ void Write(const AttentionArgs& a) const {
    if (!on || threadIdx.x != 0) return;
    const int64_t block = (static_cast<int64_t>(blockIdx.z) * gridDim.y + blockIdx.y) * gridDim.x + blockIdx.x;
    uint64_t* out = a.phase_clocks + block * kAttentionPhaseCount * 2;
    for (int p = 0; p < kAttentionPhaseCount; ++p) {
      out[2 * p] = stamps[p];
      out[2 * p + 1] = stamps[kAttentionPhaseCount + p];
    }
  }
};
#else
constexpr bool kPhaseStampsBuilt = false;
struct PhaseStamps {
  static constexpr bool on = false;
  __device__ explicit PhaseStamps(const AttentionArgs&) {}
  __device__ void Mark(int) {}
  __device__ void Write(const AttentionArgs&) const {}
};
#endif

// kFp8: the launch for the fp8 tokens (kTokenKvFp8), else for the bf16 ones;
// each skips the other's tokens, so a batch of both takes two launches.
template <int HD, int G, bool kFp8, bool kShared, int kBlockThreads = kThreads>
__global__ void __launch_bounds__(kBlockThreads, (TwoPassMinBlocks<kBlockThreads>())) AttentionKernel(AttentionArgs a) {
  constexpr int kDims = kFp8 && G <= 2 ? 16 : 8;  // dims a lane holds of each key
  constexpr int kLanesPerKey = HD / kDims;
  constexpr int kKeysPerIter = kBlockThreads / kLanesPerKey;
  constexpr int kBlockWarps = kBlockThreads / 32;
  extern __shared__ float smem[];
  const ChunkShared<G> shared(smem, a.chunk);
  float* scores = shared.scores;
  int* positions = shared.positions;
  float* reduce = shared.reduce;
  __shared__ float scratch[32];
  __shared__ MinEntry min_scratch[kBlockWarps];
  __shared__ float s_m[G], s_l[G];
  PhaseStamps stamps(a);
  stamps.Mark(kPhaseStart);

  // Launched as a programmatic dependent (LaunchChunked): the prologue below
  // reads only what the step's inputs and policy plan wrote before the
  // kernel just ahead of it (RopeAppend, which lets it start early), so it
  // overlaps that kernel; q and the new K/V rows are read after the wait.
  pdl::AllowDependents();
  const int t = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z;
  constexpr bool kWide = kBlockThreads == kWideThreads;
  // The slot list's first entries, read with the metadata (wide blocks).
  const std::conditional_t<kWide, SlotPrefetch<kBlockThreads>, NoSlotPrefetch> prefetched(a, t, kvh);
  const ChunkKeys keys = [&] {
    if constexpr (kWide) {
      return ChunkKeys(a, t, split, ChunkKeys::ReadCount{prefetched.count});
    } else {
      return ChunkKeys(a, t, kvh, split);
    }
  }();
  if (!keys.InLaunch(kFp8)) return;  // the other launch's token
  const TokenMeta& m = keys.m;
  const int begin = keys.begin, len = keys.len;
  const int tid = threadIdx.x, sub = tid % kLanesPerKey, slot = tid / kLanesPerKey;
  using Rows = KvRows<HD, kFp8, kDims, kShared>;
  const Rows rows(a, m, kvh);
  const int32_t* idx = DecodeSlots(a, m, keys.sparse, t, kvh);
  const ObserveMode observe = ModeFor(a, t, keys.sparse, m.decode_count);
  const bool split_logits = a.splits > 1 && observe.any();
  WorkspaceView ws = View(a.workspace, a.tokens, a.heads, HD, a.splits);

  // Pass 1: scores of every key of the chunk (pipelined: its positions first).
  if constexpr (kPipelinedGroup<G>) {
    if constexpr (kWide) {
      StagePrefetchedPositions<kShared>(m, idx, keys.sparse, prefetched, begin, len, positions);
    } else {
      StagePositions<kShared>(m, idx, begin, len, positions, tid, kBlockThreads);
    }
    __syncthreads();
  }
  stamps.Mark(kPhasePrologue);
  pdl::WaitForPrerequisites();
  stamps.Mark(kPhaseWait);
  const int warp = tid >> 5, lane = tid & 31;
  const auto on_logit = [&](int g, int j, float logit) {
    if (split_logits && begin + j >= m.prefix_len)
      ws.logits[(static_cast<int64_t>(t) * a.heads + kvh * G + g) * a.probs_stride + (begin + j - m.prefix_len)] =
          logit;
  };
  // Query groups: each member's keys end at its own limit (its later keys are its group's later queries').
  const auto beyond_limit = [&](int g, int j) {
    return begin + j >= a.key_limits[static_cast<int64_t>(t) * (G / a.key_limit_heads) + g / a.key_limit_heads];
  };
  mma::ValueTile first_tile;  // the tensor-core pass 3's first V tile
  // Wide tensor-core blocks: each warp's own softmax (WarpTileSoftmax), its (max, sum) per head.
  constexpr bool kWarpSoftmax = kMmaKeys<HD, G, kFp8> && kWide;
  constexpr int kWarpStats = kWarpSoftmax ? kBlockWarps * G : 1;
  __shared__ float warp_m[kWarpStats], warp_l[kWarpStats], warp_scale[kWarpStats];
  if constexpr (kMmaKeys<HD, G, kFp8>) {
    mma::QueryOperand q;
    q.Load(a.q + (static_cast<int64_t>(t) * a.heads + kvh * G) * HD, a.scale, lane);
    MmaScoreKeys<kBlockWarps>(rows, positions, len, q, warp, lane, scores, a.chunk, on_logit);
    // Wide blocks (one wave): in flight from the warp's last K tile on, across
    // its softmax (issued inside the K loop instead, its registers stayed
    // live beside two K tiles: 1.13x slower, 2026-12-04); 128-thread blocks
    // load it after the barrier (before it, they lost blocks an SM).
    if constexpr (kWide) first_tile.Load(rows, positions, warp, len, lane);
    if constexpr (kWarpSoftmax) {
      const bool limited = a.key_limits != nullptr;
      WarpTileSoftmax<kBlockWarps>(
          scores, a.chunk, len, warp, lane, [&](int g, int j) { return limited && beyond_limit(g, j); }, warp_m,
          warp_l);
    }
  } else {
    float q[G][kDims];
    LoadQuery<HD, G, kDims>(a, t, kvh, sub, q);
    ScoreKeys<G, kDims, kLanesPerKey, kKeysPerIter, kFp8, kShared>(rows, m, idx, begin, len, positions, q, sub, slot,
                                                                   scores, a.chunk, on_logit);
  }
  if constexpr (!kWarpSoftmax) __syncthreads();
  stamps.Mark(kPhaseKeys);
  if (!kWarpSoftmax && a.key_limits != nullptr) {
    for (int e = tid; e < G * len; e += kBlockThreads) {
      const int g = e / len, j = e % len;
      if (beyond_limit(g, j)) scores[g * a.chunk + j] = -INFINITY;
    }
    __syncthreads();
  }

  // Pipelined groups: pass 3's first round of V rows in flight across pass 2
  // (the positions were staged before pass 1; wide blocks' tensor-core tile is in flight already).
  using Round = KeyRound<Rows, kKeysPerIter, kFp8>;
  Round first_values;
  if constexpr (kMmaKeys<HD, G, kFp8>) {
    if constexpr (!kWide) first_tile.Load(rows, positions, warp, len, lane);
  } else if constexpr (kPipelinedGroup<G>) {
    first_values.Staged(positions, 0, len, slot);
    first_values.LoadRows(rows, sub, true);
  }

  // Pass 2: softmax statistics per query head; scores become exp(s - max)
  // (kWarpSoftmax: each warp's own, above).
  if constexpr (kWarpSoftmax) {
  } else if constexpr (G >= kBlockWarps || kBlockThreads == kWideThreads) {
    // A warp a query head: warp reductions and one barrier, where a block
    // reduction per head costs four barriers (16 for Emu3's groups of four);
    // 256-thread blocks (4+ heads) leave their other warps idle for it.
    for (int g = warp; g < G; g += kBlockWarps) {
      const float2 ml = WarpExpScores(scores + g * a.chunk, len, lane);
      if (lane == 0) {
        s_m[g] = ml.x;
        s_l[g] = ml.y;
      }
    }
  } else {
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const float2 ml = BlockExpScores(scores + g * a.chunk, len, scratch);
      if (tid == 0) {
        s_m[g] = ml.x;
        s_l[g] = ml.y;
      }
    }
  }
  if constexpr (!kWarpSoftmax) __syncthreads();
  stamps.Mark(kPhaseSoftmax);

  // Pass 3: probability-weighted values, summed over each warp's key slots, then over warps.
  if constexpr (kMmaKeys<HD, G, kFp8>) {
    MmaAccumulateValues<kBlockWarps>(rows, positions, len, scores, a.chunk, warp, lane, first_tile,
                                     reduce + warp * G * HD);
    if constexpr (kWarpSoftmax) {
      __syncthreads();
      if (warp == 0) CombineWarpSoftmax<kBlockWarps>(warp_m, warp_l, lane, warp_scale, s_m, s_l);
    }
  } else {
    float acc[G][kDims];
    AccumulateValues<G, kDims, kLanesPerKey, kKeysPerIter, kFp8>(rows, len, scores, a.chunk, positions, sub, slot, acc,
                                                                 kPipelinedGroup<G> ? &first_values : nullptr);
    if (lane < kLanesPerKey) {
#pragma unroll
      for (int g = 0; g < G; ++g)
#pragma unroll
        for (int i = 0; i < kDims; ++i) reduce[(warp * G + g) * HD + sub * kDims + i] = acc[g][i];
    }
  }
  __syncthreads();
  stamps.Mark(kPhaseValues);
  if constexpr (kWarpSoftmax) {
    // Unsplit (wide blocks): key j = prefix_len + e, weighed on warp (j / 16) % kBlockWarps's max.
    FinishChunk<HD, G, kBlockWarps>(
        a, t, kvh, split, m.decode_count, observe, reduce, s_m, s_l, min_scratch,
        [&](int e) {
          const int j = m.prefix_len + e;
          const float* scale = warp_scale + (j / mma::kTileKeys) % kBlockWarps * G;
          float p = 0.f;
#pragma unroll
          for (int g = 0; g < G; ++g) p += s_l[g] > 0.f ? scores[g * a.chunk + j] * scale[g] / s_l[g] : 0.f;
          return p * (1.f / G);
        },
        WarpScaleTable<G>{warp_scale});
  } else {
    FinishChunk<HD, G, kBlockWarps>(a, t, kvh, split, m.decode_count, observe, reduce, s_m, s_l, min_scratch,
                                    [&](int e) {
                                      float p = 0.f;
#pragma unroll
                                      for (int g = 0; g < G; ++g)
                                        p += s_l[g] > 0.f ? scores[g * a.chunk + m.prefix_len + e] / s_l[g] : 0.f;
                                      return p * (1.f / G);
                                    });
  }
  if (stamps.on) {
    __syncthreads();  // every thread's outputs issued before the end stamp
    stamps.Mark(kPhaseEnd);
    stamps.Write(a);
  }
}

// Merges two running softmax states (max, sum, weighted values) over other
// keys into (m, l, acc): each is rescaled to the larger max (an empty state,
// max -inf, weighs nothing).
template <int kDims>
__device__ __forceinline__ void MergeRunning(float& m, float& l, float (&acc)[kDims], float m2, float l2,
                                             const float (&acc2)[kDims]) {
  const float mx = fmaxf(m, m2);
  const float c1 = m == -INFINITY ? 0.f : __expf(m - mx);
  const float c2 = m2 == -INFINITY ? 0.f : __expf(m2 - mx);
  l = l * c1 + l2 * c2;
#pragma unroll
  for (int i = 0; i < kDims; ++i) acc[i] = acc[i] * c1 + acc2[i] * c2;
  m = mx;
}

// One-pass kernel (AttentionVariant::kOnePass): each key group keeps a running
// softmax per query head (max, sum, weighted values) over the keys it takes,
// so a round's K and V rows are loaded together and no barrier separates
// scores from values; the key groups' states merge at the end, rescaled to the
// block's max, and the block ends as the two-pass kernel's does. Logits are
// kept only for the observe outputs (shared memory, or the split workspace).
// Where a launch has few blocks (one head a KV head, 1-8 images) the two-pass
// kernel's three passes run each block's memory latency three times over, and
// this one was 0.65-0.87x its time (kOnePassAutoPairsPerSm); with 4-5 heads a
// KV head the running states cost the registers of the two-pass kernel's
// loads in flight, and it was 1.1-1.9x slower (H200, 2026-12-03).
// Up to four heads a KV head the one-pass kernel is held to 128 registers,
// four blocks an SM as the two-pass kernel's (unbounded it took 154-167 at
// four: three blocks an SM, two waves for Emu3's 512 blocks at 16 images;
// held, 4-56 bytes spill). At five (168 unbounded) the bound spilled ~200 bytes.
template <int G>
constexpr int OnePassMinBlocks() {
  return G <= 4 ? 4 : 0;
}

template <int HD, int G, bool kFp8, bool kShared>
__global__ void __launch_bounds__(kThreads, (OnePassMinBlocks<G>())) OnePassAttentionKernel(AttentionArgs a) {
  constexpr int kDims = kFp8 && G <= 2 ? 16 : 8;
  constexpr int kLanesPerKey = HD / kDims;
  constexpr int kKeysPerIter = kThreads / kLanesPerKey;
  constexpr int kValues = kUnroll * G;
  extern __shared__ float smem[];
  const ChunkShared<G> shared(smem, a.chunk);
  float* logits = shared.scores;  // observe outputs with splits == 1
  int* positions = shared.positions;
  float* reduce = shared.reduce;
  __shared__ float s_warp_m[kWarps][G], s_warp_l[kWarps][G];
  __shared__ MinEntry min_scratch[kWarps];
  __shared__ float s_m[G], s_l[G];

  const int t = blockIdx.x, kvh = blockIdx.y, split = blockIdx.z;
  const ChunkKeys keys(a, t, kvh, split);
  if (!keys.InLaunch(kFp8)) return;  // the other launch's token
  const TokenMeta& m = keys.m;
  const int begin = keys.begin, len = keys.len;
  const int tid = threadIdx.x, sub = tid % kLanesPerKey, slot = tid / kLanesPerKey;
  const int warp = tid >> 5, lane = tid & 31;
  using Rows = KvRows<HD, kFp8, kDims, kShared>;
  const Rows rows(a, m, kvh);
  const ObserveMode observe = ModeFor(a, t, keys.sparse, m.decode_count);
  const bool keep_logits = observe.any() && a.splits == 1;
  float* split_logits = a.splits > 1 && observe.any()
                            ? View(a.workspace, a.tokens, a.heads, HD, a.splits).logits +
                                  (static_cast<int64_t>(t) * a.heads + kvh * G) * a.probs_stride
                            : nullptr;

  float q[G][kDims];
  LoadQuery<HD, G, kDims>(a, t, kvh, sub, q);
  // Query groups: chunk entries at or past a member's limit are masked.
  int limit[G];
#pragma unroll
  for (int g = 0; g < G; ++g)
    limit[g] = a.key_limits == nullptr
                   ? len
                   : a.key_limits[static_cast<int64_t>(t) * (G / a.key_limit_heads) + g / a.key_limit_heads] - begin;
  StagePositions<kShared>(m, DecodeSlots(a, m, keys.sparse, t, kvh), begin, len, positions, tid, kThreads);
  __syncthreads();

  float run_m[G], run_l[G], acc[G][kDims];
#pragma unroll
  for (int g = 0; g < G; ++g) {
    run_m[g] = -INFINITY;
    run_l[g] = 0.f;
#pragma unroll
    for (int i = 0; i < kDims; ++i) acc[g][i] = 0.f;
  }
  using Round = KeyRound<Rows, kKeysPerIter, kFp8>;
  for (int base = 0; base < len; base += kKeysPerIter * kUnroll) {
    Round keys_round, values_round;
    keys_round.Staged(positions, base, len, slot);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) values_round.pos[u] = keys_round.pos[u];
    keys_round.LoadRows(rows, sub, false);
    values_round.LoadRows(rows, sub, true);
    float s[kValues];
    KeyGroupDots<G, kDims, kLanesPerKey, kFp8, Rows>(keys_round, q, sub, s);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int j = base + u * kKeysPerIter + slot;
#pragma unroll
      for (int g = 0; g < G; ++g) {
        float& logit = s[u * G + g];
        if (keys_round.pos[u] < 0 || j >= limit[g]) logit = -INFINITY;
        if (sub == 0 && j < len) {
          if (keep_logits) logits[g * a.chunk + j] = logit;
          if (split_logits != nullptr && begin + j >= m.prefix_len)
            split_logits[g * a.probs_stride + begin + j - m.prefix_len] = logit;
        }
      }
    }
    // The running states: rescaled to the round's new maxima, then its keys
    // added (s becomes exp(s - max) in place: registers bound the blocks an SM).
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float mx = run_m[g];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) mx = fmaxf(mx, s[u * G + g]);
      const float c = (run_m[g] == -INFINITY) ? 1.f : __expf(run_m[g] - mx);
      run_l[g] *= c;
#pragma unroll
      for (int i = 0; i < kDims; ++i) acc[g][i] *= c;
      run_m[g] = mx;
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) s[u * G + g] = mx == -INFINITY ? 0.f : __expf(s[u * G + g] - mx);
    }
    const float(&p)[kValues] = s;
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float v[kDims];
      Rows::Unpack(values_round.raw[u], v);  // zeros for an entry without a row
#pragma unroll
      for (int g = 0; g < G; ++g) {
        run_l[g] += p[u * G + g];
        float w = p[u * G + g];
        if constexpr (kFp8) w *= values_round.scale[u];
#pragma unroll
        for (int i = 0; i < kDims; ++i) acc[g][i] += w * v[i];
      }
    }
  }

  // The warp's key groups merged (lanes of a sub hold the same dims).
#pragma unroll
  for (int o = 16; o >= kLanesPerKey; o >>= 1) {
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float other[kDims];
#pragma unroll
      for (int i = 0; i < kDims; ++i) other[i] = __shfl_xor_sync(0xffffffffu, acc[g][i], o);
      MergeRunning<kDims>(run_m[g], run_l[g], acc[g], __shfl_xor_sync(0xffffffffu, run_m[g], o),
                          __shfl_xor_sync(0xffffffffu, run_l[g], o), other);
    }
  }
  // Then the warps: each rescaled to the block's max per query head.
  if (lane == 0) {
#pragma unroll
    for (int g = 0; g < G; ++g) s_warp_m[warp][g] = run_m[g];
  }
  __syncthreads();
  if (lane < kLanesPerKey) {
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float mx = -INFINITY;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, s_warp_m[w][g]);
      const float c = run_m[g] == -INFINITY ? 0.f : __expf(run_m[g] - mx);
#pragma unroll
      for (int i = 0; i < kDims; ++i) reduce[(warp * G + g) * HD + sub * kDims + i] = acc[g][i] * c;
      if (lane == 0) s_warp_l[warp][g] = run_l[g] * c;
    }
  }
  __syncthreads();
  if (tid < G) {
    float mx = -INFINITY, l = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) mx = fmaxf(mx, s_warp_m[w][tid]);
#pragma unroll
    for (int w = 0; w < kWarps; ++w) l += s_warp_l[w][tid];
    s_m[tid] = mx;
    s_l[tid] = l;
  }
  __syncthreads();
  FinishChunk<HD, G>(a, t, kvh, split, m.decode_count, observe, reduce, s_m, s_l, min_scratch, [&](int e) {
    float p = 0.f;
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const float logit = logits[g * a.chunk + m.prefix_len + e];
      p += (s_l[g] > 0.f && logit != -INFINITY) ? __expf(logit - s_m[g]) / s_l[g] : 0.f;
    }
    return p * (1.f / G);
  });
}

template <int HD, int G>
__global__ void __launch_bounds__(kThreads) CombineKernel(AttentionArgs a) {
  __shared__ float s_m[G], s_l[G];
  __shared__ MinEntry min_scratch[kWarps];
  CombineSplits<HD, G>(a, blockIdx.x, blockIdx.y, s_m, s_l, min_scratch);
}

// Staged kernel for short key sets (splits == 1): one block per (token,
// kv_head) copies every K and V row it attends into shared memory with
// cp.async before computing, so all of its loads are in flight at once (the
// prompt's rows even before the slot list arrives); then scores, block softmax
// and V from shared memory, with the same thread layout as the two-pass kernel.
// Shared memory: K and V [cap][HD] bf16, scores [G][cap], positions [cap],
// the cross-warp reduction [kWarps][G][HD].
__host__ __device__ constexpr size_t StagedBytes(int head_dim, int group, int cap) {
  return static_cast<size_t>(cap) * head_dim * 2 * 2 + static_cast<size_t>(group + 1) * cap * 4 +
         static_cast<size_t>(kWarps) * group * head_dim * 4;
}

template <int HD, int G>
__global__ void __launch_bounds__(kThreads) StagedAttentionKernel(AttentionArgs a, int cap) {
  constexpr int kLanesPerKey = HD / 8;
  constexpr int kKeysPerIter = kThreads / kLanesPerKey;
  extern __shared__ __align__(16) unsigned char staged_smem[];
  bf16* ks = reinterpret_cast<bf16*>(staged_smem);                                // [cap][HD]
  bf16* vs = ks + static_cast<int64_t>(cap) * HD;                                 // [cap][HD]
  float* scores = reinterpret_cast<float*>(vs + static_cast<int64_t>(cap) * HD);  // [G][cap]
  int* positions = reinterpret_cast<int*>(scores + G * cap);                      // [cap]
  float* reduce = reinterpret_cast<float*>(positions + cap);                      // [kWarps][G][HD]
  __shared__ float scratch[32];
  __shared__ MinEntry min_scratch[kWarps];
  __shared__ float s_l[G];

  const int t = blockIdx.x, kvh = blockIdx.y;
  TokenMeta m = a.meta[t];
  const bool sparse = (m.flags & kTokenSparse) && a.decode_idx != nullptr;
  if (sparse && a.counts != nullptr) m.decode_count = a.counts[static_cast<int64_t>(t) * a.kv_heads + kvh];
  m.decode_count = max(m.decode_count, 0);
  const int len = min(m.prefix_len + m.decode_count, cap);
  const int prompt = min(m.prefix_len, len);
  const int tid = threadIdx.x, sub = tid % kLanesPerKey, slot = tid / kLanesPerKey;
  const KvRows<HD, false, 8, true> rows(a, m, kvh);  // not auto-chosen: one instantiation serves both
  const int32_t* idx = DecodeSlots(a, m, sparse, t, kvh);
  const ObserveMode observe = ModeFor(a, t, sparse, m.decode_count);

  // 1. The prompt's K and V rows: their positions need no slot list.
  for (int c = tid; c < prompt * kLanesPerKey; c += kThreads) {
    const int j = c / kLanesPerKey, d = (c % kLanesPerKey) * 8;
    detail::CpAsync16(ks + j * HD + d, rows.KRow(j) + d);
    detail::CpAsync16(vs + j * HD + d, rows.VRow(j) + d);
  }
  detail::CpAsyncCommit();
  // 2. Positions of every key (the decode ones through the slot list).
  for (int j = tid; j < len; j += kThreads) positions[j] = KeyPosition<true>(j, m, idx);
  // q (scaled) in registers while the copies fly.
  float q[G][8];
  LoadQuery<HD, G, 8>(a, t, kvh, sub, q);
  __syncthreads();
  // 3. The decode rows: K, then V, as two groups.
  const int decode_chunks = (len - prompt) * kLanesPerKey;
  for (int c = tid; c < decode_chunks; c += kThreads) {
    const int j = prompt + c / kLanesPerKey, d = (c % kLanesPerKey) * 8;
    const int pos = positions[j];
    if (pos >= 0) detail::CpAsync16(ks + j * HD + d, rows.KRow(pos) + d);
  }
  detail::CpAsyncCommit();
  for (int c = tid; c < decode_chunks; c += kThreads) {
    const int j = prompt + c / kLanesPerKey, d = (c % kLanesPerKey) * 8;
    const int pos = positions[j];
    if (pos >= 0) detail::CpAsync16(vs + j * HD + d, rows.VRow(pos) + d);
  }
  detail::CpAsyncCommit();

  // 4. Scores once every K row has landed (the V group may still be in flight).
  detail::CpAsyncWait<1>();
  __syncthreads();
  for (int base = 0; base < len; base += kKeysPerIter) {
    const int j = base + slot;
    const bool valid = j < len && positions[j] >= 0;
    float k[8];
    if (valid) {
      detail::Unpack8(detail::Load8(ks + j * HD + sub * 8), k);
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) k[i] = 0.f;
    }
#pragma unroll
    for (int g = 0; g < G; ++g) {
      float sc = 0.f;
#pragma unroll
      for (int i = 0; i < 8; ++i) sc += q[g][i] * k[i];
#pragma unroll
      for (int o = kLanesPerKey / 2; o > 0; o >>= 1) sc += __shfl_xor_sync(0xffffffffu, sc, o);
      if (sub == 0 && j < len) scores[g * cap + j] = valid ? sc : -INFINITY;
    }
  }
  __syncthreads();

  // 5. Softmax per query head; scores become exp(s - max).
#pragma unroll
  for (int g = 0; g < G; ++g) {
    const float sum = BlockExpScores(scores + g * cap, len, scratch).y;
    if (tid == 0) s_l[g] = sum;
  }
  detail::CpAsyncWait<0>();
  __syncthreads();

  // 6. Probability-weighted values from shared memory.
  float acc[G][8];
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[g][i] = 0.f;
  for (int j = slot; j < len; j += kKeysPerIter) {
    if (positions[j] < 0) continue;
    float v[8];
    detail::Unpack8(detail::Load8(vs + j * HD + sub * 8), v);
#pragma unroll
    for (int g = 0; g < G; ++g) {
      const float p = scores[g * cap + j];
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[g][i] += p * v[i];
    }
  }
#pragma unroll
  for (int g = 0; g < G; ++g)
#pragma unroll
    for (int i = 0; i < 8; ++i)
#pragma unroll
      for (int o = 16; o >= kLanesPerKey; o >>= 1) acc[g][i] += __shfl_xor_sync(0xffffffffu, acc[g][i], o);
  const int warp = tid >> 5, lane = tid & 31;
  if (lane < kLanesPerKey) {
#pragma unroll
    for (int g = 0; g < G; ++g)
#pragma unroll
      for (int i = 0; i < 8; ++i) reduce[(warp * G + g) * HD + sub * 8 + i] = acc[g][i];
  }
  __syncthreads();
  for (int e = tid; e < G * HD; e += kThreads) {
    float total = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) total += reduce[w * G * HD + e];
    const int g = e / HD, d = e % HD;
    const float l = s_l[g];
    a.out[(static_cast<int64_t>(t) * a.heads + kvh * G + g) * HD + d] = __float2bfloat16(l > 0.f ? total / l : 0.f);
  }

  // (len < prefix + count only when max_keys understates the keys: those entries are not observed.)
  WriteObserve(
      a, t, kvh, max(0, min(m.decode_count, len - m.prefix_len)), observe,
      [&](int e) {
        float p = 0.f;
#pragma unroll
        for (int g = 0; g < G; ++g) p += s_l[g] > 0.f ? scores[g * cap + m.prefix_len + e] / s_l[g] : 0.f;
        return p * (1.f / G);
      },
      min_scratch);
}

// Warp kernel for key sets of at most kWarpMaxKeys with splits == 1: one warp
// per (token, kv head), four per block, with warp-level reductions only (no
// block barrier), so an SM keeps four times the (token, kv head) pairs of the
// two-pass kernel in flight. The same lane layout and math as that kernel:
// scores and positions in shared memory ([G][cap] and [cap] per warp), a
// softmax per query head, V weighted by the probabilities, the observe
// outputs from the same probabilities.
constexpr int kWarpMaxKeys = 1024;

__host__ __device__ constexpr size_t WarpBytes(int group, int cap) {
  return static_cast<size_t>(kWarps) * (group + 1) * cap * sizeof(float);
}

// Sharing launches of MHA bf16 rows (the Janus-Pro and Lumina-mGPT shape) are
// held to 8 blocks an SM, the plain kernel's occupancy: the prompt owner's
// bases took 72 registers (64 without) and 22% more time at 7B / 64 images
// (H200, call 2); under the bound ptxas fits them in 64 without spilling.
// 0: no minimum (ptxas's choice; an explicit 1 makes it use more registers).
template <bool kShared, int G, bool kFp8>
constexpr int WarpMinBlocks() {
  return kShared && G == 1 && !kFp8 ? 8 : 0;
}

template <int HD, int G, bool kFp8, bool kShared>
__global__ void __launch_bounds__(kThreads, (WarpMinBlocks<kShared, G, kFp8>()))
    WarpAttentionKernel(AttentionArgs a, int cap) {
  constexpr int kDims = kFp8 && G <= 2 ? 16 : 8;
  constexpr int kLanesPerKey = HD / kDims;
  constexpr int kKeysPerIter = 32 / kLanesPerKey;
  using Rows = KvRows<HD, kFp8, kDims, kShared>;
  extern __shared__ float warp_smem[];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float* scores = warp_smem + static_cast<int64_t>(warp) * (G + 1) * cap;  // [G][cap]
  int* positions = reinterpret_cast<int*>(scores + G * cap);               // [cap]
  const int64_t pair = static_cast<int64_t>(blockIdx.x) * kWarps + warp;
  if (pair >= static_cast<int64_t>(a.tokens) * a.kv_heads) return;
  const int t = static_cast<int>(pair / a.kv_heads), kvh = static_cast<int>(pair % a.kv_heads);
  TokenMeta m = a.meta[t];
  if (((m.flags & kTokenKvFp8) != 0) != kFp8) return;  // the other launch's token
  const bool sparse = (m.flags & kTokenSparse) && a.decode_idx != nullptr;
  if (sparse && a.counts != nullptr) m.decode_count = a.counts[static_cast<int64_t>(t) * a.kv_heads + kvh];
  m.decode_count = max(m.decode_count, 0);
  const int len = min(m.prefix_len + m.decode_count, cap);
  const int sub = lane % kLanesPerKey, slot = lane / kLanesPerKey;
  const Rows rows(a, m, kvh);
  const int32_t* idx = DecodeSlots(a, m, sparse, t, kvh);
  const ObserveMode observe = ModeFor(a, t, sparse, m.decode_count);

  float q[G][kDims];
  LoadQuery<HD, G, kDims>(a, t, kvh, sub, q);

  // Scores of every key (pipelined: its positions first).
  if constexpr (kPipelinedGroup<G>) {
    StagePositions<kShared>(m, idx, 0, len, positions, lane, 32);
    __syncwarp();
  }
  ScoreKeys<G, kDims, kLanesPerKey, kKeysPerIter, kFp8, kShared>(rows, m, idx, 0, len, positions, q, sub, slot, scores,
                                                                 cap, [](int, int, float) {});
  __syncwarp();

  // Softmax per query head; scores become exp(s - max).
  float l_of[G];
#pragma unroll
  for (int g = 0; g < G; ++g) l_of[g] = WarpExpScores(scores + g * cap, len, lane).y;
  __syncwarp();

  // Probability-weighted values, summed over the key slots; lanes [0, kLanesPerKey) write.
  float acc[G][kDims];
  AccumulateValues<G, kDims, kLanesPerKey, kKeysPerIter, kFp8>(rows, len, scores, cap, positions, sub, slot, acc);
  if (lane < kLanesPerKey) {
#pragma unroll
    for (int g = 0; g < G; ++g) {
      __nv_bfloat16* out = a.out + (static_cast<int64_t>(t) * a.heads + kvh * G + g) * HD + sub * kDims;
      const float inv = l_of[g] > 0.f ? 1.f / l_of[g] : 0.f;
#pragma unroll
      for (int i = 0; i < kDims; ++i) out[i] = __float2bfloat16(l_of[g] > 0.f ? acc[g][i] * inv : 0.f);
    }
  }

  // Observe outputs (entries past len only when max_keys understates the keys: not observed).
  if (!observe.any()) return;
  const int count = max(0, min(m.decode_count, len - m.prefix_len));
  const int64_t head = static_cast<int64_t>(t) * a.kv_heads + kvh;
  float* probs = observe.probs ? a.probs + head * a.probs_stride : nullptr;
  const int from = observe.argmin ? max(observe.from, 0) : count;
  MinEntry best{INFINITY, -1};
  for (int e = (probs != nullptr ? 0 : from) + lane; e < count; e += 32) {
    float p = 0.f;
#pragma unroll
    for (int g = 0; g < G; ++g) p += l_of[g] > 0.f ? scores[g * cap + m.prefix_len + e] / l_of[g] : 0.f;
    p *= 1.f / G;
    if (probs != nullptr) probs[e] = p;
    if (e >= from) best = Smaller(best, MinEntry{p, e});
  }
  if (!observe.argmin) return;
  best = WarpArgmin(best);
  if (lane == 0) a.argmin[head] = best.e;
}

size_t SharedBytes(int head_dim, int group, int chunk, int warps = kWarps) {
  return (static_cast<size_t>(group + 1) * chunk + static_cast<size_t>(warps) * group * head_dim) * sizeof(float);
}

// Shared memory the staged kernel may use (the H200's opt-in maximum per block).
constexpr size_t kStagedMaxBytes = 226 * 1024;  // leaves room for the static shared memory

int StagedCap(const AttentionArgs& a) {
  const int keys = a.max_keys > 0 ? a.max_keys : a.chunk;
  return (keys + 7) / 8 * 8;
}

int WarpCap(const AttentionArgs& a) {
  const int keys = a.max_keys > 0 ? a.max_keys : a.chunk;
  return (keys + 31) / 32 * 32;
}

template <int HD, int G, bool kFp8, bool kShared>
cudaError_t LaunchWarp(const AttentionArgs& a, int cap, cudaStream_t stream) {
  static const cudaError_t attr =
      cudaFuncSetAttribute(WarpAttentionKernel<HD, G, kFp8, kShared>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(WarpBytes(G, kWarpMaxKeys)));
  if (attr != cudaSuccess) return attr;
  const int64_t pairs = static_cast<int64_t>(a.tokens) * a.kv_heads;
  const int blocks = static_cast<int>((pairs + kWarps - 1) / kWarps);
  WarpAttentionKernel<HD, G, kFp8, kShared><<<blocks, kThreads, WarpBytes(G, cap), stream>>>(a, cap);
  return cudaGetLastError();
}

// A two-pass kernel with kBlockThreads threads a block and the chunk's shared
// memory (SharedBytes), as a programmatic dependent: it waits for the kernel
// before it after its prologue (AttentionKernel).
template <auto kKernel, int kBlockThreads>
cudaError_t LaunchDependent(const AttentionArgs& a, int head_dim, int group, cudaStream_t stream) {
  constexpr int kBlockWarps = kBlockThreads / 32;
  static const cudaError_t attr =
      cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(SharedBytes(head_dim, group, kMaxAttentionChunk, kBlockWarps)));
  if (attr != cudaSuccess) return attr;
  return pdl::Launch(kKernel, dim3(a.tokens, a.kv_heads, a.splits), dim3(kBlockThreads),
                     SharedBytes(head_dim, group, a.chunk, kBlockWarps), stream, a);
}

// The two-pass or the one-pass kernel: a block per (token, kv head, split).
template <int HD, int G, bool kFp8, bool kShared>
cudaError_t LaunchChunked(const AttentionArgs& a, bool one_pass, cudaStream_t stream) {
  if (!one_pass) {
    if constexpr (HD == 128 && kPipelinedGroup<G>) {
      if (TwoPassBlockThreads(a) == kWideThreads)
        return LaunchDependent<AttentionKernel<HD, G, kFp8, kShared, kWideThreads>, kWideThreads>(a, HD, G, stream);
    }
    return LaunchDependent<AttentionKernel<HD, G, kFp8, kShared, kThreads>, kThreads>(a, HD, G, stream);
  }
  auto kernel = OnePassAttentionKernel<HD, G, kFp8, kShared>;
  static const cudaError_t attr = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                       static_cast<int>(SharedBytes(HD, G, kMaxAttentionChunk)));
  if (attr != cudaSuccess) return attr;
  kernel<<<dim3(a.tokens, a.kv_heads, a.splits), kThreads, SharedBytes(HD, G, a.chunk), stream>>>(a);
  return cudaGetLastError();
}

// One launch per KV format present (bf16, fp8), in the kernels that read
// shared prompts only when some token does.
template <int HD, int G, bool kShared>
cudaError_t LaunchFormats(const AttentionArgs& a, AttentionVariant variant, cudaStream_t stream) {
  const int cap = WarpCap(a);
  auto launch = [&](auto fp8) {
    constexpr bool kFp8 = decltype(fp8)::value;
    return variant == AttentionVariant::kWarp
               ? LaunchWarp<HD, G, kFp8, kShared>(a, cap, stream)
               : LaunchChunked<HD, G, kFp8, kShared>(a, variant == AttentionVariant::kOnePass, stream);
  };
  if (a.kv_formats == 0 || (a.kv_formats & kKvFormatsBf16)) {
    const cudaError_t err = launch(std::false_type{});
    if (err != cudaSuccess) return err;
  }
  if (a.kv_formats & kKvFormatsFp8) return launch(std::true_type{});
  return cudaSuccess;
}

template <int HD, int G>
cudaError_t Launch(const AttentionArgs& a, cudaStream_t stream) {
  const AttentionVariant variant = ChosenAttentionVariant(a);
  if (variant == AttentionVariant::kStaged) {
    static const cudaError_t attr = cudaFuncSetAttribute(
        StagedAttentionKernel<HD, G>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(kStagedMaxBytes));
    if (attr != cudaSuccess) return attr;
    const int cap = StagedCap(a);
    StagedAttentionKernel<HD, G><<<dim3(a.tokens, a.kv_heads), kThreads, StagedBytes(HD, G, cap), stream>>>(a, cap);
    return cudaGetLastError();
  }
  const bool warp = variant == AttentionVariant::kWarp;
  const cudaError_t err = (a.kv_formats & kKvSharedPrompts) ? LaunchFormats<HD, G, true>(a, variant, stream)
                                                            : LaunchFormats<HD, G, false>(a, variant, stream);
  if (err != cudaSuccess || warp || a.splits == 1 || a.split_counters != nullptr) return err;
  CombineKernel<HD, G><<<dim3(a.tokens, a.kv_heads), kThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

template <int HD>
cudaError_t LaunchGroup(const AttentionArgs& a, int group, cudaStream_t stream) {
  switch (group) {
    case 1:
      return Launch<HD, 1>(a, stream);
    case 2:
      return Launch<HD, 2>(a, stream);
    case 4:
      return Launch<HD, 4>(a, stream);
    case 5:  // Qwen2.5-14B's 40 / 8 (NextStep-1)
      return Launch<HD, 5>(a, stream);
    case 8:
      return Launch<HD, 8>(a, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace

bool AttentionPhaseStampsBuilt() { return kPhaseStampsBuilt; }

bool AttentionShapeSupported(int32_t heads, int32_t kv_heads, int32_t head_dim) {
  if (kv_heads <= 0 || heads % kv_heads != 0) return false;
  const int group = heads / kv_heads;
  return (head_dim == 16 || head_dim == 32 || head_dim == 64 || head_dim == 128) &&
         (group == 1 || group == 2 || group == 4 || group == 5 || group == 8);
}

void ChooseAttentionSplits(int32_t tokens, int32_t kv_heads, int32_t query_group, int32_t max_keys, int32_t sm_count,
                           int32_t* splits, int32_t* chunk, int32_t blocks_per_sm) {
  const int64_t pairs = std::max<int64_t>(1, static_cast<int64_t>(tokens) * kv_heads);
  const int64_t sms = std::max(sm_count, 1);
  if (blocks_per_sm == kAutoBlocksPerSm) blocks_per_sm = query_group >= kUnsplitQueryGroup && pairs >= sms ? 1 : 2;
  const int64_t target = std::max(blocks_per_sm, 1) * sms;
  const int32_t keys = std::max(max_keys, 1);
  int64_t s = std::max<int64_t>(1, (target + pairs - 1) / pairs);
  s = std::min<int64_t>(s, std::max(1, keys / 64));  // chunks of at least 64 keys
  s = std::max<int64_t>(s, (keys + kMaxAttentionChunk - 1) / kMaxAttentionChunk);
  int64_t c = (keys + s - 1) / s;
  c = (c + 31) / 32 * 32;
  c = std::min<int64_t>(c, kMaxAttentionChunk);
  s = (keys + c - 1) / c;
  *splits = static_cast<int32_t>(s);
  *chunk = static_cast<int32_t>(c);
}

size_t AttentionWorkspaceBytes(int32_t tokens, int32_t heads, int32_t head_dim, int32_t splits, int32_t probs_stride) {
  if (splits <= 1) return 0;
  const size_t part = static_cast<size_t>(tokens) * heads * splits;
  return (2 * part + part * head_dim + static_cast<size_t>(tokens) * heads * probs_stride) * sizeof(float);
}

int TwoPassBlockThreads(const AttentionArgs& a) {
  const bool grouped = a.kv_heads > 0 && a.heads % a.kv_heads == 0 && a.heads / a.kv_heads >= kUnsplitQueryGroup;
  const bool few_pairs = a.sm_count > 0 && static_cast<int64_t>(a.tokens) * a.kv_heads <=
                                               static_cast<int64_t>(kWideMaxPairsPerSm) * a.sm_count;
  return a.head_dim == 128 && grouped && a.splits == 1 && a.chunk >= kWideMinKeys && few_pairs ? kWideThreads
                                                                                               : kThreads;
}

AttentionVariant ChosenAttentionVariant(const AttentionArgs& a) {
  if (a.kv_heads > 0 && a.heads % a.kv_heads == 0) {
    const bool few_pairs = a.sm_count > 0 && static_cast<int64_t>(a.tokens) * a.kv_heads <
                                                 static_cast<int64_t>(kOnePassAutoPairsPerSm) * a.sm_count;
    if (a.variant == AttentionVariant::kOnePass ||
        (a.variant == AttentionVariant::kAuto && a.key_limits == nullptr && a.heads == a.kv_heads && few_pairs))
      return AttentionVariant::kOnePass;
  }
  if (a.variant == AttentionVariant::kTwoPass || a.splits != 1 || a.kv_heads <= 0 || a.heads % a.kv_heads != 0 ||
      a.key_limits != nullptr)
    return AttentionVariant::kTwoPass;
  if (a.variant == AttentionVariant::kWarp || a.variant == AttentionVariant::kAuto) {
    const int cap = WarpCap(a);
    const bool many_pairs = a.sm_count > 0 && static_cast<int64_t>(a.tokens) * a.kv_heads >=
                                                  static_cast<int64_t>(kWarpAutoPairsPerSm) * a.sm_count;
    if (a.variant == AttentionVariant::kWarp ? cap <= kWarpMaxKeys : (cap <= kWarpAutoMaxKeys && many_pairs))
      return AttentionVariant::kWarp;
    if (a.variant == AttentionVariant::kWarp) return AttentionVariant::kTwoPass;
  }
  if (a.kv_formats & kKvFormatsFp8) return AttentionVariant::kTwoPass;  // the staged kernel reads bf16 only
  const size_t bytes = StagedBytes(a.head_dim, a.heads / a.kv_heads, StagedCap(a));
  const size_t limit = a.variant == AttentionVariant::kStaged ? kStagedMaxBytes : kStagedAutoBytes;
  return bytes <= limit ? AttentionVariant::kStaged : AttentionVariant::kTwoPass;
}

cudaError_t DecodeAttention(const AttentionArgs& a, cudaStream_t stream) {
  if (a.tokens <= 0) return cudaSuccess;
  if (!AttentionShapeSupported(a.heads, a.kv_heads, a.head_dim)) return cudaErrorInvalidValue;
  if (a.splits < 1 || a.chunk <= 0 || a.chunk > kMaxAttentionChunk) return cudaErrorInvalidValue;
  if (a.splits > 1 && a.workspace == nullptr) return cudaErrorInvalidValue;
  if (a.decode_idx != nullptr && a.idx_stride <= 0) return cudaErrorInvalidValue;
  if ((a.probs != nullptr || a.argmin != nullptr) && a.probs_stride <= 0) return cudaErrorInvalidValue;
  const int group = a.heads / a.kv_heads;
  if (a.key_limits != nullptr &&
      (a.key_limit_heads <= 0 || group % a.key_limit_heads != 0 || a.probs != nullptr || a.argmin != nullptr))
    return cudaErrorInvalidValue;
  switch (a.head_dim) {
    case 16:
      return LaunchGroup<16>(a, group, stream);
    case 32:
      return LaunchGroup<32>(a, group, stream);
    case 64:
      return LaunchGroup<64>(a, group, stream);
    case 128:
      return LaunchGroup<128>(a, group, stream);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace argen::kernels
