// Decode attention (dense and sparse, one chunk and split-K) against a float64
// host reference over the same bf16 KV, with probabilities and argmin.
#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "kernels/sparse/policy.h"
#include "kernels/tests/cuda_test_util.h"

namespace argen::kernels {
namespace {

using testing::Bf16Bits;
using testing::DeviceArray;
using testing::FromBf16Bits;

struct Case {
  int head_dim, heads, kv_heads;
  bool sparse;
  int splits;  // 1 or more
  AttentionVariant variant = AttentionVariant::kTwoPass;
  bool short_rows = false;  // key sets short enough for the staged kernel
  bool wide = false;        // sm_count set so that the two-pass kernel takes 256-thread blocks
};

std::string Name(const Case& c) {
  return "hd" + std::to_string(c.head_dim) + "_h" + std::to_string(c.heads) + "_kv" + std::to_string(c.kv_heads) +
         (c.sparse ? "_sparse" : "_dense") + "_s" + std::to_string(c.splits) +
         (c.variant == AttentionVariant::kStaged    ? "_staged"
          : c.variant == AttentionVariant::kWarp    ? "_warp"
          : c.variant == AttentionVariant::kOnePass ? "_onepass"
                                                    : "") +
         (c.short_rows ? "_short" : "") + (c.wide ? "_wide" : "");
}

class AttentionTest : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionTest, MatchesFloat64Reference) {
  ASSERT_NO_FATAL_FAILURE(testing::RequireDevice());
  const Case c = GetParam();
  const int hd = c.head_dim, H = c.heads, KVH = c.kv_heads, G = H / KVH, layers = 2, layer = 1;
  std::mt19937 rng(hd * 100 + H * 10 + KVH + c.sparse + 7 * c.splits);
  // Tokens with different prompt lengths, slot counts and decode counts.
  struct Row {
    int lp, n_slots, count;
  };
  const std::vector<Row> rows =
      c.short_rows ? std::vector<Row>{{50, 300, 79}, {3, 40, 17}, {0, 64, 64}, {20, 10, 0}, {9, 200, 130}}
                   : std::vector<Row>{{50, 300, 300}, {3, 40, 17}, {0, 64, 64}, {20, 10, 0}, {9, 700, 513}};
  const int T = rows.size();
  std::vector<TokenMeta> meta(T);
  int64_t offset = 0;
  int max_keys = 0, max_count = 0;
  for (int t = 0; t < T; ++t) {
    const int cap = rows[t].lp + rows[t].n_slots;
    meta[t] = {offset, cap, 0, -1, rows[t].lp, rows[t].lp, rows[t].count, c.sparse ? kTokenSparse : 0, 0};
    offset += 2LL * layers * KVH * cap * hd;
    max_keys = std::max(max_keys, rows[t].lp + rows[t].count);
    max_count = std::max(max_count, rows[t].count);
  }
  std::vector<float> pool_f(offset);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& x : pool_f) x = testing::RoundBf16(nd(rng));
  const auto pool_h = testing::ToBf16(pool_f);
  const auto q = testing::RandomFloats(rng, static_cast<size_t>(T) * H * hd, 1.5f);
  // Slot lists: distinct random slots; the sparse lists of token 4 carry one
  // out-of-region slot, which must be ignored (probability 0).
  const int stride = std::max(max_count, 1);
  std::vector<int32_t> idx(static_cast<size_t>(T) * KVH * stride, -7);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < KVH; ++h) {
      std::vector<int32_t> slots(rows[t].n_slots);
      std::iota(slots.begin(), slots.end(), 0);
      std::shuffle(slots.begin(), slots.end(), rng);
      for (int e = 0; e < rows[t].count; ++e) idx[(t * KVH + h) * stride + e] = c.sparse ? slots[e] : e;
      if (c.sparse && t == 4) idx[(t * KVH + h) * stride + 5] = rows[t].n_slots + 3;
    }

  // Sparse lists may differ in length per kv head: odd heads drop their last entry.
  std::vector<int32_t> counts(static_cast<size_t>(T) * KVH);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < KVH; ++h) counts[t * KVH + h] = c.sparse ? std::max(0, rows[t].count - h % 2) : rows[t].count;

  // Reference.
  const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
  std::vector<double> want_out(static_cast<size_t>(T) * H * hd, 0.0);
  std::vector<double> want_probs(static_cast<size_t>(T) * KVH * stride, 0.0);
  for (int t = 0; t < T; ++t)
    for (int kvh = 0; kvh < KVH; ++kvh) {
      const TokenMeta& m = meta[t];
      const int64_t ls = static_cast<int64_t>(KVH) * m.capacity * hd;
      const int64_t kb = m.kv_offset + layer * ls + static_cast<int64_t>(kvh) * m.capacity * hd;
      const int64_t vb = kb + layers * ls;
      std::vector<int> pos;
      for (int j = 0; j < m.prefix_len; ++j) pos.push_back(j);
      for (int e = 0; e < counts[t * KVH + kvh]; ++e) {
        const int p = m.decode_base + idx[(t * KVH + kvh) * stride + e];
        pos.push_back(p < m.capacity ? p : -1);
      }
      for (int g = 0; g < G; ++g) {
        const int h = kvh * G + g;
        std::vector<double> s(pos.size(), -INFINITY);
        double mx = -INFINITY;
        for (size_t j = 0; j < pos.size(); ++j) {
          if (pos[j] < 0) continue;
          double d = 0;
          for (int i = 0; i < hd; ++i) d += static_cast<double>(q[(t * H + h) * hd + i]) * pool_f[kb + pos[j] * hd + i];
          s[j] = d * scale;
          mx = std::max(mx, s[j]);
        }
        double l = 0;
        for (auto& x : s) l += (x = (x == -INFINITY ? 0.0 : std::exp(x - mx)));
        for (size_t j = 0; j < pos.size(); ++j) {
          const double p = l > 0 ? s[j] / l : 0.0;
          if (pos[j] >= 0)
            for (int i = 0; i < hd; ++i) want_out[(t * H + h) * hd + i] += p * pool_f[vb + pos[j] * hd + i];
          if (static_cast<int>(j) >= m.prefix_len) want_probs[(t * KVH + kvh) * stride + (j - m.prefix_len)] += p / G;
        }
      }
    }

  DeviceArray<Bf16Bits> pool(pool_h);
  DeviceArray<float> q_d(q);
  DeviceArray<TokenMeta> meta_d(meta);
  DeviceArray<int32_t> idx_d(idx), counts_d(counts);
  DeviceArray<Bf16Bits> out(want_out.size());
  DeviceArray<float> probs(want_probs.size());
  DeviceArray<int32_t> argmin(static_cast<size_t>(T) * KVH);
  out.Poison();
  probs.Poison();
  argmin.Poison();
  AttentionArgs a;
  a.q = q_d.get();
  a.kv_pool = reinterpret_cast<const __nv_bfloat16*>(pool.get());
  a.meta = meta_d.get();
  a.tokens = T;
  a.heads = H;
  a.kv_heads = KVH;
  a.head_dim = hd;
  a.num_layers = layers;
  a.layer = layer;
  a.scale = static_cast<float>(scale);
  a.decode_idx = idx_d.get();  // dense tokens ignore the lists (they hold the identity)
  a.idx_stride = stride;
  a.counts = counts_d.get();
  a.probs = probs.get();
  a.probs_stride = stride;
  a.argmin = argmin.get();
  a.out = reinterpret_cast<__nv_bfloat16*>(out.get());
  a.splits = c.splits;
  a.chunk = ((max_keys + c.splits - 1) / c.splits + 31) / 32 * 32;
  a.splits = (max_keys + a.chunk - 1) / a.chunk;
  ASSERT_EQ(a.splits, c.splits);
  DeviceArray<char> ws(std::max<size_t>(1, AttentionWorkspaceBytes(T, H, hd, a.splits, stride)));
  a.workspace = ws.get();
  a.max_keys = max_keys;
  a.variant = c.variant;
  a.sm_count = c.wide ? 132 : 0;  // 5 tokens x at most 8 KV heads: at most 2 pairs an SM
  ASSERT_EQ(ChosenAttentionVariant(a), c.variant) << "the case must run the kernel it names";
  // Wide blocks where asked for, except over short key sets (a chunk below 256 keys).
  if (c.variant == AttentionVariant::kTwoPass) {
    ASSERT_EQ(TwoPassBlockThreads(a), c.wide && a.chunk >= 256 ? 256 : 128) << "chunk " << a.chunk;
  }
  ARGEN_CUDA_OK(DecodeAttention(a, 0));
  ARGEN_CUDA_OK(cudaDeviceSynchronize());

  const auto out_h = out.Download();
  std::vector<double> got(out_h.size());
  for (size_t i = 0; i < got.size(); ++i) got[i] = FromBf16Bits(out_h[i]);
  // Rows with keys only (row 3 with lp=20 has keys; all have keys here).
  EXPECT_LT(testing::RelativeError(got, want_out), 1e-2);
  const auto probs_h = probs.Download();
  const auto argmin_h = argmin.Download();
  for (int t = 0; t < T && c.sparse; ++t)
    for (int kvh = 0; kvh < KVH; ++kvh) {
      const int n = counts[t * KVH + kvh];
      int want_arg = -1;
      double best = INFINITY, second = INFINITY;
      for (int e = 0; e < n; ++e) {
        const double w = want_probs[(t * KVH + kvh) * stride + e];
        ASSERT_NEAR(probs_h[(t * KVH + kvh) * stride + e], w, 1e-4 + 1e-3 * w) << "token " << t << " entry " << e;
        if (w < best) {
          second = best;
          best = w;
          want_arg = e;
        } else if (w < second)
          second = w;
      }
      // The argmin must be the reference's unless the two smallest are within rounding.
      if (n > 0 && second - best > 1e-6) {
        EXPECT_EQ(argmin_h[t * KVH + kvh], want_arg) << "token " << t << " kv head " << kvh;
      }
      if (n == 0) {
        EXPECT_EQ(argmin_h[t * KVH + kvh], -1);
      }
    }

  // Split launches with split counters: the last chunk of each (token, kv head)
  // merges the partials itself. The same bits as the combine launch, and the
  // counters left zero, so a second launch on them gives the same again.
  if (c.splits > 1) {
    DeviceArray<int32_t> counters(std::vector<int32_t>(static_cast<size_t>(T) * KVH, 0));
    a.split_counters = counters.get();
    for (int run = 0; run < 2; ++run) {
      out.Poison();
      probs.Poison();
      argmin.Poison();
      ARGEN_CUDA_OK(DecodeAttention(a, 0));
      ARGEN_CUDA_OK(cudaDeviceSynchronize());
      EXPECT_EQ(out.Download(), out_h) << "fused combine, run " << run;
      if (c.sparse) {
        EXPECT_EQ(probs.Download(), probs_h) << "fused combine, run " << run;
        EXPECT_EQ(argmin.Download(), argmin_h) << "fused combine, run " << run;
      }
      EXPECT_EQ(counters.Download(), std::vector<int32_t>(static_cast<size_t>(T) * KVH, 0)) << "run " << run;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionTest,
    ::testing::Values(
        Case{128, 4, 4, false, 1}, Case{128, 4, 4, true, 1}, Case{128, 4, 4, false, 4}, Case{128, 4, 4, true, 3},
        Case{64, 8, 2, true, 1}, Case{64, 8, 2, true, 5}, Case{32, 8, 1, false, 2}, Case{32, 2, 1, true, 1},
        Case{128, 16, 2, true, 2}, Case{16, 4, 4, true, 1}, Case{16, 4, 2, false, 3},
        // Group 5 (NextStep-1's 40 / 8 heads), every kernel.
        Case{128, 10, 2, false, 3}, Case{128, 10, 2, true, 1},
        Case{128, 10, 2, true, 1, AttentionVariant::kStaged, true},
        Case{128, 10, 2, true, 1, AttentionVariant::kWarp, false},
        // The staged kernel (splits 1, short key sets), dense and sparse tokens.
        Case{128, 4, 4, true, 1, AttentionVariant::kStaged, true},
        Case{128, 4, 4, false, 1, AttentionVariant::kStaged, true},
        Case{128, 16, 2, true, 1, AttentionVariant::kStaged, true},
        Case{64, 8, 2, true, 1, AttentionVariant::kStaged, true},
        Case{64, 8, 2, true, 1, AttentionVariant::kStaged, false},
        Case{32, 8, 1, false, 1, AttentionVariant::kStaged, true},
        Case{32, 2, 1, true, 1, AttentionVariant::kStaged, false},
        Case{16, 4, 4, true, 1, AttentionVariant::kStaged, false},
        Case{128, 4, 4, true, 1, AttentionVariant::kTwoPass, true},
        // The warp kernel (splits 1, key sets up to 1024).
        Case{128, 4, 4, true, 1, AttentionVariant::kWarp, false},
        Case{128, 4, 4, false, 1, AttentionVariant::kWarp, false},
        Case{128, 4, 4, true, 1, AttentionVariant::kWarp, true},
        Case{128, 16, 2, true, 1, AttentionVariant::kWarp, false},
        Case{64, 8, 2, true, 1, AttentionVariant::kWarp, true},
        Case{32, 8, 1, false, 1, AttentionVariant::kWarp, false},
        Case{32, 2, 1, true, 1, AttentionVariant::kWarp, true}, Case{16, 4, 4, true, 1, AttentionVariant::kWarp, false},
        // The one-pass kernel: every group size, split and not, observe outputs.
        Case{128, 4, 4, false, 1, AttentionVariant::kOnePass}, Case{128, 4, 4, true, 1, AttentionVariant::kOnePass},
        Case{128, 4, 4, true, 3, AttentionVariant::kOnePass}, Case{64, 8, 2, true, 5, AttentionVariant::kOnePass},
        Case{64, 8, 2, false, 1, AttentionVariant::kOnePass}, Case{32, 8, 1, false, 2, AttentionVariant::kOnePass},
        Case{32, 2, 1, true, 1, AttentionVariant::kOnePass}, Case{128, 16, 2, true, 2, AttentionVariant::kOnePass},
        Case{128, 16, 4, true, 1, AttentionVariant::kOnePass}, Case{128, 16, 4, true, 2, AttentionVariant::kOnePass},
        Case{128, 16, 4, false, 3, AttentionVariant::kOnePass}, Case{128, 10, 2, true, 1, AttentionVariant::kOnePass},
        Case{128, 10, 2, false, 3, AttentionVariant::kOnePass}, Case{16, 4, 4, true, 1, AttentionVariant::kOnePass},
        Case{16, 4, 2, false, 3, AttentionVariant::kOnePass},
        // 256-thread two-pass blocks (unsplit, 4, 5 and 8 heads a KV head, head_dim 128); split: 128.
        Case{128, 16, 4, true, 1, AttentionVariant::kTwoPass, false, true},
        Case{128, 16, 4, false, 1, AttentionVariant::kTwoPass, false, true},
        Case{128, 10, 2, true, 1, AttentionVariant::kTwoPass, false, true},
        Case{128, 16, 2, true, 1, AttentionVariant::kTwoPass, false, true},
        Case{128, 16, 4, true, 1, AttentionVariant::kTwoPass, true, true},  // too few keys: 128
        Case{128, 16, 4, true, 2, AttentionVariant::kTwoPass, false, false}),
    [](const ::testing::TestParamInfo<Case>& info) { return Name(info.param); });

// The argmin output is exactly sparse::ArgminFrom over the kernel's own probs
// output (same entry, lowest index on ties), for a per-launch start and for the
// per-token observe choices (argmin without probs, as the CUDA backend's
// diagonal rows use it), with exact ties: duplicated slots (equal scores),
// several out-of-region slots (probability 0) and a zero query (all equal).
struct ArgminCase {
  int head_dim, heads, kv_heads, splits;
  AttentionVariant variant;
};

class AttentionArgminTest : public ::testing::TestWithParam<ArgminCase> {};

TEST_P(AttentionArgminTest, ArgminIsThatOfTheKernelsOwnProbs) {
  ASSERT_NO_FATAL_FAILURE(testing::RequireDevice());
  const ArgminCase c = GetParam();
  const int hd = c.head_dim, H = c.heads, KVH = c.kv_heads, layers = 1;
  std::mt19937 rng(hd + 3 * H + 5 * KVH + 7 * c.splits + 11 * static_cast<int>(c.variant));
  struct Row {
    int lp, n_slots, count;
  };
  const std::vector<Row> rows = {{50, 288, 29}, {50, 288, 58}, {7, 40, 33}, {0, 64, 64},
                                 {12, 30, 9},   {50, 288, 29}, {3, 20, 1},  {5, 16, 0}};
  const int T = rows.size();
  std::vector<TokenMeta> meta(T);
  int64_t offset = 0;
  int max_keys = 0, stride = 1;
  for (int t = 0; t < T; ++t) {
    const int cap = rows[t].lp + rows[t].n_slots;
    meta[t] = {offset, cap, 0, -1, rows[t].lp, rows[t].lp, rows[t].count, kTokenSparse, 0};
    offset += 2LL * layers * KVH * cap * hd;
    max_keys = std::max(max_keys, rows[t].lp + rows[t].count);
    stride = std::max(stride, rows[t].count);
  }
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> pool_f(offset);
  for (auto& x : pool_f) x = testing::RoundBf16(nd(rng));
  auto q = testing::RandomFloats(rng, static_cast<size_t>(T) * H * hd, 1.5f);
  // Token 5: zero query, every key scores 0: all probabilities tie.
  std::fill(q.begin() + static_cast<size_t>(5) * H * hd, q.begin() + static_cast<size_t>(6) * H * hd, 0.f);
  std::vector<int32_t> idx(static_cast<size_t>(T) * KVH * stride, -7), counts(static_cast<size_t>(T) * KVH);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < KVH; ++h) {
      std::vector<int32_t> slots(rows[t].n_slots);
      std::iota(slots.begin(), slots.end(), 0);
      std::shuffle(slots.begin(), slots.end(), rng);
      int32_t* list = idx.data() + (static_cast<size_t>(t) * KVH + h) * stride;
      for (int e = 0; e < rows[t].count; ++e) list[e] = slots[e];
      if (rows[t].count >= 8) {
        list[rows[t].count - 1] = list[2];                        // duplicate slot: an exact tie
        list[rows[t].count - 3] = list[5];                        // and another
        if (t % 2 == 0) list[4] = list[6] = rows[t].n_slots + 1;  // out of region: probability 0, tied
      }
      counts[t * KVH + h] = rows[t].count;
    }
  DeviceArray<Bf16Bits> pool(testing::ToBf16(pool_f));
  DeviceArray<float> q_d(q);
  DeviceArray<TokenMeta> meta_d(meta);
  DeviceArray<int32_t> idx_d(idx), counts_d(counts);
  DeviceArray<Bf16Bits> out(static_cast<size_t>(T) * H * hd);
  DeviceArray<float> probs(static_cast<size_t>(T) * KVH * stride);
  DeviceArray<int32_t> argmin(static_cast<size_t>(T) * KVH);
  AttentionArgs a;
  a.q = q_d.get();
  a.kv_pool = reinterpret_cast<const __nv_bfloat16*>(pool.get());
  a.meta = meta_d.get();
  a.tokens = T;
  a.heads = H;
  a.kv_heads = KVH;
  a.head_dim = hd;
  a.num_layers = layers;
  a.layer = 0;
  a.scale = 1.f / std::sqrt(static_cast<float>(hd));
  a.decode_idx = idx_d.get();
  a.idx_stride = stride;
  a.counts = counts_d.get();
  a.probs_stride = stride;
  a.out = reinterpret_cast<__nv_bfloat16*>(out.get());
  a.chunk = ((max_keys + c.splits - 1) / c.splits + 31) / 32 * 32;
  a.splits = (max_keys + a.chunk - 1) / a.chunk;
  ASSERT_EQ(a.splits, c.splits);
  a.max_keys = max_keys;
  a.variant = c.variant;
  ASSERT_EQ(ChosenAttentionVariant(a), c.variant);
  DeviceArray<char> ws(std::max<size_t>(1, AttentionWorkspaceBytes(T, H, hd, a.splits, stride)));
  a.workspace = ws.get();
  const uint32_t kPoison = 0x7f7f7f7fu;
  auto poisoned_f = [&](float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u == kPoison;
  };

  // Run A, per-launch start: probs and argmin of every token.
  std::vector<float> probs_a;
  for (int from : {0, 3, 31}) {
    probs.Poison();
    argmin.Poison();
    a.probs = probs.get();
    a.argmin = argmin.get();
    a.argmin_from = from;
    a.observe = nullptr;
    ARGEN_CUDA_OK(DecodeAttention(a, 0));
    ARGEN_CUDA_OK(cudaDeviceSynchronize());
    const auto p_h = probs.Download();
    const auto m_h = argmin.Download();
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < KVH; ++h) {
        const float* p = p_h.data() + (static_cast<size_t>(t) * KVH + h) * stride;
        const int n = counts[t * KVH + h];
        for (int e = 0; e < n; ++e) ASSERT_FALSE(poisoned_f(p[e])) << "probs not written, token " << t;
        EXPECT_EQ(m_h[t * KVH + h], sparse::ArgminFrom(p, from, n))
            << "from " << from << " token " << t << " head " << h;
      }
    if (from == 0) probs_a = p_h;
  }
  // Token 5 (zero query) ties everywhere: its argmin is the start itself.
  // Run B, per-token choices: argmin only (various starts), probs only, nothing.
  std::vector<int32_t> observe(T);
  for (int t = 0; t < T; ++t) {
    const int n = rows[t].count;
    const int choice[] = {4, 0, kObserveProbs, 2, n + 2, 0, kObserveNothing, 1};
    observe[t] = choice[t];
  }
  DeviceArray<int32_t> observe_d(observe);
  probs.Poison();
  argmin.Poison();
  a.observe = observe_d.get();
  a.argmin_from = 0;
  ARGEN_CUDA_OK(DecodeAttention(a, 0));
  ARGEN_CUDA_OK(cudaDeviceSynchronize());
  const auto p_h = probs.Download();
  const auto m_h = argmin.Download();
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < KVH; ++h) {
      const size_t at = (static_cast<size_t>(t) * KVH + h) * stride;
      const int n = counts[t * KVH + h];
      if (observe[t] >= 0) {
        EXPECT_EQ(m_h[t * KVH + h], sparse::ArgminFrom(probs_a.data() + at, observe[t], n))
            << "token " << t << " head " << h << " from " << observe[t];
        if (t == 5 && observe[t] < n) {
          EXPECT_EQ(m_h[t * KVH + h], observe[t]);
        }
      } else {
        EXPECT_EQ(static_cast<uint32_t>(m_h[t * KVH + h]), kPoison) << "argmin written for token " << t;
      }
      for (int e = 0; e < n; ++e) {
        if (observe[t] == kObserveProbs) {
          EXPECT_EQ(p_h[at + e], probs_a[at + e]) << "token " << t << " entry " << e;
        } else {
          EXPECT_TRUE(poisoned_f(p_h[at + e])) << "probs written for token " << t;
        }
      }
    }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionArgminTest,
    ::testing::Values(
        ArgminCase{128, 4, 4, 1, AttentionVariant::kTwoPass}, ArgminCase{128, 4, 4, 1, AttentionVariant::kStaged},
        ArgminCase{128, 4, 4, 2, AttentionVariant::kTwoPass}, ArgminCase{64, 8, 2, 1, AttentionVariant::kTwoPass},
        ArgminCase{64, 8, 2, 1, AttentionVariant::kStaged}, ArgminCase{64, 8, 2, 4, AttentionVariant::kTwoPass},
        ArgminCase{128, 10, 2, 2, AttentionVariant::kTwoPass}, ArgminCase{128, 10, 2, 1, AttentionVariant::kWarp},
        ArgminCase{32, 8, 1, 1, AttentionVariant::kStaged}, ArgminCase{16, 2, 1, 2, AttentionVariant::kTwoPass},
        ArgminCase{128, 4, 4, 1, AttentionVariant::kWarp}, ArgminCase{64, 8, 2, 1, AttentionVariant::kWarp},
        ArgminCase{32, 8, 1, 1, AttentionVariant::kWarp}, ArgminCase{128, 4, 4, 1, AttentionVariant::kOnePass},
        ArgminCase{64, 8, 2, 4, AttentionVariant::kOnePass}, ArgminCase{128, 10, 2, 2, AttentionVariant::kOnePass},
        ArgminCase{128, 16, 4, 1, AttentionVariant::kOnePass}),
    [](const ::testing::TestParamInfo<ArgminCase>& info) {
      const ArgminCase& c = info.param;
      return "hd" + std::to_string(c.head_dim) + "_h" + std::to_string(c.heads) + "_kv" + std::to_string(c.kv_heads) +
             "_s" + std::to_string(c.splits) +
             (c.variant == AttentionVariant::kStaged    ? "_staged"
              : c.variant == AttentionVariant::kWarp    ? "_warp"
              : c.variant == AttentionVariant::kOnePass ? "_onepass"
                                                        : "_twopass");
    });

// Phase stamps (AttentionArgs::phase_clocks): in a build with them every block
// of a two-pass launch (split, 128- and 256-thread blocks) writes its phases in
// order, in cycles and in ns; without them the buffer is left as it was. Either
// way the stamped launch's output is bitwise the unstamped one's.
TEST(AttentionPhases, EveryBlockStampsItsPhasesInOrder) {
  ASSERT_NO_FATAL_FAILURE(testing::RequireDevice());
  const int hd = 128, H = 16, KVH = 4, T = 3, lp = 40, count = 300, layers = 1;
  for (const int splits : {1, 2}) {
    SCOPED_TRACE("splits " + std::to_string(splits));
    std::mt19937 rng(splits);
    std::vector<TokenMeta> meta(T);
    const int cap = lp + count;
    for (int t = 0; t < T; ++t) meta[t] = {2LL * t * layers * KVH * cap * hd, cap, 0, -1, lp, lp, count, 0, 0};
    DeviceArray<Bf16Bits> pool(testing::ToBf16(testing::RandomFloats(rng, 2ULL * T * layers * KVH * cap * hd)));
    DeviceArray<float> q(testing::RandomFloats(rng, static_cast<size_t>(T) * H * hd));
    DeviceArray<TokenMeta> meta_d(meta);
    DeviceArray<Bf16Bits> out(static_cast<size_t>(T) * H * hd);
    const int chunk = (lp + count + splits - 1) / splits;
    DeviceArray<char> ws(std::max<size_t>(1, AttentionWorkspaceBytes(T, H, hd, splits, 0)));
    DeviceArray<int32_t> counters(std::vector<int32_t>(static_cast<size_t>(T) * KVH, 0));
    const int blocks = T * KVH * splits;
    DeviceArray<uint64_t> stamps(static_cast<size_t>(blocks) * kAttentionPhaseCount * 2);
    AttentionArgs a;
    a.q = q.get();
    a.kv_pool = reinterpret_cast<const __nv_bfloat16*>(pool.get());
    a.meta = meta_d.get();
    a.tokens = T;
    a.heads = H;
    a.kv_heads = KVH;
    a.head_dim = hd;
    a.num_layers = layers;
    a.scale = 0.088f;
    a.out = reinterpret_cast<__nv_bfloat16*>(out.get());
    a.splits = splits;
    a.chunk = (chunk + 31) / 32 * 32;
    a.workspace = ws.get();
    a.split_counters = counters.get();
    a.variant = AttentionVariant::kTwoPass;
    a.sm_count = 132;  // unsplit: 256-thread blocks
    ASSERT_EQ(TwoPassBlockThreads(a), splits == 1 ? 256 : 128);
    ARGEN_CUDA_OK(DecodeAttention(a, 0));
    ARGEN_CUDA_OK(cudaDeviceSynchronize());
    const auto plain = out.Download();
    stamps.Poison(0);
    out.Poison();
    a.phase_clocks = stamps.get();
    ARGEN_CUDA_OK(DecodeAttention(a, 0));
    ARGEN_CUDA_OK(cudaDeviceSynchronize());
    EXPECT_EQ(out.Download(), plain);
    const auto got = stamps.Download();
    if (!AttentionPhaseStampsBuilt()) {
      EXPECT_EQ(got, std::vector<uint64_t>(got.size(), 0)) << "a build without ARGEN_ATTENTION_PHASES wrote stamps";
      continue;
    }
    for (int b = 0; b < blocks; ++b) {
      const uint64_t* s = got.data() + static_cast<size_t>(b) * kAttentionPhaseCount * 2;
      EXPECT_GT(s[1], 0u) << "block " << b << " wrote no stamps";
      for (int p = 1; p < kAttentionPhaseCount; ++p) {
        EXPECT_GE(s[2 * p], s[2 * (p - 1)]) << "block " << b << " cycles, phase " << p;
        EXPECT_GE(s[2 * p + 1], s[2 * (p - 1) + 1]) << "block " << b << " ns, phase " << p;
      }
      EXPECT_GT(s[2 * kPhaseEnd], s[0]) << "block " << b;
    }
  }
}

TEST(AttentionSplits, ChosenSplitsCoverEveryKey) {
  for (int tokens : {1, 2, 32, 256})
    for (int keys : {1, 50, 626, 1024, 3000}) {
      int splits = 0, chunk = 0;
      ChooseAttentionSplits(tokens, 16, 1, keys, 132, &splits, &chunk);
      EXPECT_GE(static_cast<int64_t>(splits) * chunk, keys);
      EXPECT_LE(chunk, kMaxAttentionChunk);
      EXPECT_GE(splits, 1);
      EXPECT_LT(static_cast<int64_t>(splits - 1) * chunk, keys) << "an empty split";
    }
}

}  // namespace
}  // namespace argen::kernels
