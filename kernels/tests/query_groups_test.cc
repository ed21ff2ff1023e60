// Query groups (kernels/query_groups.h): a row's queries gathered into one
// attention token with per-member key limits give what each query gives
// attended alone (the same two-pass kernel, other reduction shapes: within
// bf16 rounding), in order (dense slots [0, count)) and out of order (nested
// slot lists), one chunk and split-K; empty slots write nothing.
#include "kernels/query_groups.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/tests/cuda_test_util.h"

namespace argen::kernels {
namespace {

using testing::Bf16Bits;
using testing::DeviceArray;
using testing::FromBf16Bits;

struct GroupCase {
  int heads, kv_heads, size;  // size: slots a group (size * heads / kv_heads <= 8)
  int splits;
  bool listed;                                            // out of order: nested slot lists
  AttentionVariant grouped = AttentionVariant::kTwoPass;  // the grouped launch's kernel
  int hd = 64;
  // Set: the launches may take 256-thread blocks (kernels/attention.cu's
  // TwoPassBlockThreads; with head_dim 128 and groups of four, the warps' own softmax).
  int sm_count = 0;
};

class QueryGroupsTest : public ::testing::TestWithParam<GroupCase> {};

TEST_P(QueryGroupsTest, GroupedQueriesMatchEachQueryAlone) {
  ASSERT_NO_FATAL_FAILURE(testing::RequireDevice());
  const GroupCase c = GetParam();
  const int hd = c.hd, H = c.heads, KVH = c.kv_heads, G = H / KVH, layers = 2, layer = 1;
  std::mt19937 rng(H * 31 + KVH * 7 + c.size + 3 * c.splits + c.listed);
  // Two rows (regions); their queries' decode counts, increasing (nested key sets).
  const int lp = 21, n_slots = 400;
  const std::vector<std::vector<int>> counts = {{150, 151, 290}, {7, 333}};
  std::vector<TokenMeta> meta;
  std::vector<int32_t> lists;
  std::vector<std::vector<int32_t>> members_of;  // per row: its tokens
  int64_t offset = 0;
  for (const auto& row : counts) {
    const int cap = lp + n_slots;
    // The row's written slots in a list order with holes (listed), or [0, count) (dense).
    std::vector<int32_t> slots(n_slots);
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), rng);
    const int list_at = static_cast<int>(lists.size());
    if (c.listed) lists.insert(lists.end(), slots.begin(), slots.begin() + row.back());
    members_of.emplace_back();
    for (int count : row) {
      TokenMeta m{offset, cap, 0, -1, lp, lp, count, c.listed ? kTokenListed : 0, 0};
      m.list_offset = list_at;
      members_of.back().push_back(static_cast<int32_t>(meta.size()));
      meta.push_back(m);
    }
    offset += 2LL * layers * KVH * cap * hd;
  }
  const int T = static_cast<int>(meta.size());
  std::vector<float> pool_f(offset);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& x : pool_f) x = testing::RoundBf16(nd(rng));
  DeviceArray<Bf16Bits> pool(testing::ToBf16(pool_f));
  DeviceArray<float> q(testing::RandomFloats(rng, static_cast<size_t>(T) * H * hd, 1.5f));
  DeviceArray<TokenMeta> d_meta(meta);
  DeviceArray<int32_t> d_lists(lists.empty() ? std::vector<int32_t>{0} : lists);
  const int max_keys = lp + 333;
  int splits = c.splits, chunk = (max_keys + splits - 1) / splits;
  chunk = (chunk + 31) / 32 * 32;
  DeviceArray<float> ws(AttentionWorkspaceBytes(T, H * c.size, hd, splits, 0) / 4 + 1);

  AttentionArgs base;
  base.kv_pool = reinterpret_cast<const __nv_bfloat16*>(pool.get());
  base.kv_heads = KVH;
  base.head_dim = hd;
  base.num_layers = layers;
  base.layer = layer;
  base.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  base.token_lists = d_lists.get();
  base.splits = splits;
  base.chunk = chunk;
  base.workspace = ws.get();
  base.max_keys = max_keys;
  base.variant = AttentionVariant::kTwoPass;
  base.sm_count = c.sm_count;

  // Each query alone.
  DeviceArray<Bf16Bits> alone(static_cast<size_t>(T) * H * hd);
  AttentionArgs a = base;
  a.q = q.get();
  a.meta = d_meta.get();
  a.tokens = T;
  a.heads = H;
  a.out = reinterpret_cast<__nv_bfloat16*>(alone.get());
  ARGEN_CUDA_OK(DecodeAttention(a, nullptr));

  // Grouped: each row's queries in groups of c.size slots (the last one padded).
  std::vector<int32_t> members, limits;
  std::vector<TokenMeta> group_meta;
  for (const auto& row : members_of) {
    for (size_t first = 0; first < row.size(); first += c.size) {
      const size_t last = std::min(row.size(), first + c.size);
      for (int p = 0; p < c.size; ++p) {
        const int32_t token = first + p < last ? row[first + p] : -1;
        members.push_back(token);
        limits.push_back(token < 0 ? 0 : meta[token].prefix_len + meta[token].decode_count);
      }
      group_meta.push_back(meta[row[last - 1]]);
    }
  }
  const int groups = static_cast<int>(group_meta.size());
  DeviceArray<int32_t> d_members(members), d_limits(limits);
  DeviceArray<TokenMeta> d_group_meta(group_meta);
  DeviceArray<float> grouped_q(static_cast<size_t>(groups) * c.size * H * hd);
  DeviceArray<Bf16Bits> grouped_out(static_cast<size_t>(groups) * c.size * H * hd);
  DeviceArray<Bf16Bits> got(static_cast<size_t>(T) * H * hd);
  got.Poison();
  ARGEN_CUDA_OK(GatherQueryGroups(q.get(), d_members.get(), groups, c.size, H, KVH, hd, grouped_q.get(), nullptr));
  AttentionArgs g = base;
  g.q = grouped_q.get();
  g.meta = d_group_meta.get();
  g.tokens = groups;
  g.heads = H * c.size;
  g.out = reinterpret_cast<__nv_bfloat16*>(grouped_out.get());
  g.key_limits = d_limits.get();
  g.key_limit_heads = G;
  g.variant = c.grouped;
  ASSERT_EQ(ChosenAttentionVariant(g), c.grouped);
  ARGEN_CUDA_OK(DecodeAttention(g, nullptr));
  ARGEN_CUDA_OK(ScatterQueryGroups(reinterpret_cast<const __nv_bfloat16*>(grouped_out.get()), d_members.get(), groups,
                                   c.size, H, KVH, hd, reinterpret_cast<__nv_bfloat16*>(got.get()), nullptr));
  ARGEN_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<Bf16Bits> want_h = alone.Download(), got_h = got.Download();
  // Without its limit a group's first query would attend its later queries' keys too: far off.
  double worst = 0;
  for (size_t i = 0; i < want_h.size(); ++i) {
    const double w = FromBf16Bits(want_h[i]), v = FromBf16Bits(got_h[i]);
    ASSERT_TRUE(std::isfinite(v)) << i;
    worst = std::max(worst, std::abs(v - w));
  }
  EXPECT_LT(worst, 2e-2) << "grouped against alone";
}

INSTANTIATE_TEST_SUITE_P(Shapes, QueryGroupsTest,
                         ::testing::Values(GroupCase{4, 4, 4, 1, false}, GroupCase{4, 4, 4, 3, false},
                                           GroupCase{4, 4, 2, 1, true}, GroupCase{4, 4, 8, 2, true},
                                           GroupCase{8, 2, 2, 1, true}, GroupCase{8, 2, 2, 3, false},
                                           GroupCase{4, 4, 4, 1, false, AttentionVariant::kOnePass},
                                           GroupCase{4, 4, 8, 3, true, AttentionVariant::kOnePass},
                                           GroupCase{8, 2, 2, 2, true, AttentionVariant::kOnePass},
                                           // Head dim 128, four heads a grouped KV head: the tensor-core loops,
                                           // in 128-thread blocks and in 256-thread ones.
                                           GroupCase{8, 4, 2, 1, true, AttentionVariant::kTwoPass, 128},
                                           GroupCase{8, 4, 2, 1, false, AttentionVariant::kTwoPass, 128, 132},
                                           GroupCase{8, 4, 2, 1, true, AttentionVariant::kTwoPass, 128, 132}),
                         [](const ::testing::TestParamInfo<GroupCase>& info) {
                           const GroupCase& c = info.param;
                           std::string name = "h";
                           for (const std::string& part :
                                {std::to_string(c.heads), std::string("_kv"), std::to_string(c.kv_heads),
                                 std::string("_size"), std::to_string(c.size), std::string("_s"),
                                 std::to_string(c.splits), std::string(c.listed ? "_listed" : "_dense"),
                                 std::string(c.grouped == AttentionVariant::kOnePass ? "_onepass" : ""),
                                 std::string(c.hd != 64 ? "_hd" + std::to_string(c.hd) : ""),
                                 std::string(c.sm_count > 0 ? "_sms" + std::to_string(c.sm_count) : "")})
                             name += part;
                           return name;
                         });

TEST(QueryGroupsTest, KeyLimitsNeedADenseTwoPassLaunch) {
  AttentionArgs a;
  a.tokens = 1;
  a.heads = 8;
  a.kv_heads = 2;
  a.head_dim = 64;
  a.chunk = 64;
  const int32_t limit = 3;
  a.key_limits = &limit;
  a.key_limit_heads = 3;  // not a divisor of the group (4)
  EXPECT_EQ(DecodeAttention(a, nullptr), cudaErrorInvalidValue);
  a.key_limit_heads = 2;
  int32_t argmin = 0;
  a.argmin = &argmin;
  a.probs_stride = 4;
  EXPECT_EQ(DecodeAttention(a, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(ChosenAttentionVariant(a), AttentionVariant::kTwoPass);
}

}  // namespace
}  // namespace argen::kernels
