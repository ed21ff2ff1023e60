// Decode attention (dense and sparse, one chunk and split-K) against a float64
// host reference over the same bf16 KV, with probabilities and argmin.
#include "kernels/attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

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
};

std::string Name(const Case& c) {
  return "hd" + std::to_string(c.head_dim) + "_h" + std::to_string(c.heads) + "_kv" +
         std::to_string(c.kv_heads) + (c.sparse ? "_sparse" : "_dense") + "_s" + std::to_string(c.splits);
}

class AttentionTest : public ::testing::TestWithParam<Case> {};

TEST_P(AttentionTest, MatchesFloat64Reference) {
  ASSERT_NO_FATAL_FAILURE(testing::RequireDevice());
  const Case c = GetParam();
  const int hd = c.head_dim, H = c.heads, KVH = c.kv_heads, G = H / KVH, layers = 2, layer = 1;
  std::mt19937 rng(hd * 100 + H * 10 + KVH + c.sparse + 7 * c.splits);
  // Tokens with different prompt lengths, slot counts and decode counts.
  struct Row { int lp, n_slots, count; };
  const std::vector<Row> rows = {{50, 300, 300}, {3, 40, 17}, {0, 64, 64}, {20, 10, 0}, {9, 700, 513}};
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
      for (int e = 0; e < rows[t].count; ++e)
        idx[(t * KVH + h) * stride + e] = c.sparse ? slots[e] : e;
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
          if (static_cast<int>(j) >= m.prefix_len)
            want_probs[(t * KVH + kvh) * stride + (j - m.prefix_len)] += p / G;
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
        if (w < best) { second = best; best = w; want_arg = e; }
        else if (w < second) second = w;
      }
      // The argmin must be the reference's unless the two smallest are within rounding.
      if (n > 0 && second - best > 1e-6) {
        EXPECT_EQ(argmin_h[t * KVH + kvh], want_arg) << "token " << t << " kv head " << kvh;
      }
      if (n == 0) {
        EXPECT_EQ(argmin_h[t * KVH + kvh], -1);
      }
    }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, AttentionTest,
    ::testing::Values(Case{128, 4, 4, false, 1}, Case{128, 4, 4, true, 1}, Case{128, 4, 4, false, 4},
                      Case{128, 4, 4, true, 3}, Case{64, 8, 2, true, 1}, Case{64, 8, 2, true, 5},
                      Case{32, 8, 1, false, 2}, Case{32, 2, 1, true, 1}, Case{128, 16, 2, true, 2},
                      Case{16, 4, 4, true, 1}, Case{16, 4, 2, false, 3}),
    [](const ::testing::TestParamInfo<Case>& info) { return Name(info.param); });

TEST(AttentionSplits, ChosenSplitsCoverEveryKey) {
  for (int tokens : {1, 2, 32, 256})
    for (int keys : {1, 50, 626, 1024, 3000}) {
      int splits = 0, chunk = 0;
      ChooseAttentionSplits(tokens, 16, keys, 132, &splits, &chunk);
      EXPECT_GE(static_cast<int64_t>(splits) * chunk, keys);
      EXPECT_LE(chunk, kMaxAttentionChunk);
      EXPECT_GE(splits, 1);
      EXPECT_LT(static_cast<int64_t>(splits - 1) * chunk, keys) << "an empty split";
    }
}

}  // namespace
}  // namespace argen::kernels
