// Prompt-KV sharing in decode attention (kernels/token_meta.h): a token that
// reads its prompt from another row's region must compute exactly what the
// same token computes over a private copy of those positions: output,
// probabilities and argmin bit for bit, for every kernel (two-pass, split-K,
// warp, staged), bf16 and fp8 regions, dense and sparse slot lists, a whole
// shared prompt and a shared prefix with the prompt's tail in the row's own
// region.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "kernels/attention.h"
#include "kernels/kv_fp8.h"
#include "kernels/tests/cuda_test_util.h"

namespace argen::kernels {
namespace {

using testing::Bf16Bits;
using testing::DeviceArray;

struct SharedCase {
  int head_dim, heads, kv_heads;
  bool sparse, fp8;
  int splits;
  AttentionVariant variant;
  bool wide = false;  // 250 decode keys and sm_count set: the two-pass kernel's 256-thread blocks
};

std::string Name(const SharedCase& c) {
  static const char* kVariants[] = {"auto", "two_pass", "staged", "warp", "one_pass"};
  return "hd" + std::to_string(c.head_dim) + "_h" + std::to_string(c.heads) + "_kv" + std::to_string(c.kv_heads) +
         (c.sparse ? "_sparse" : "_dense") + (c.fp8 ? "_fp8" : "_bf16") + "_s" + std::to_string(c.splits) + "_" +
         kVariants[static_cast<int>(c.variant)] + (c.wide ? "_wide" : "");
}

class AttentionSharedPromptTest : public ::testing::TestWithParam<SharedCase> {};

// Region helpers over the pool's bytes: where position `pos` of (kv, layer,
// head) lives in a region of `cap` positions, and how many bytes a vector has.
struct RegionView {
  int layers, kv_heads, head_dim;
  bool fp8;
  int64_t Bytes(int cap) const {
    return fp8 ? Fp8Region(layers, kv_heads, cap, head_dim).total : 2LL * 2 * layers * kv_heads * cap * head_dim;
  }
  // Copies position `from` of region (src, src_cap) to position `to` of region (dst, dst_cap), every layer and head.
  void CopyPosition(uint8_t* pool, int64_t src, int src_cap, int from, int64_t dst, int dst_cap, int to) const {
    for (int kv = 0; kv < 2; ++kv)
      for (int l = 0; l < layers; ++l)
        for (int h = 0; h < kv_heads; ++h) {
          const int64_t sv = (int64_t{l} * kv_heads + h) * src_cap + from,
                        dv = (int64_t{l} * kv_heads + h) * dst_cap + to;
          if (fp8) {
            const Fp8KvRegion rs = Fp8Region(layers, kv_heads, src_cap, head_dim);
            const Fp8KvRegion rd = Fp8Region(layers, kv_heads, dst_cap, head_dim);
            std::memcpy(pool + dst + (kv ? rd.v_codes : 0) + dv * head_dim,
                        pool + src + (kv ? rs.v_codes : 0) + sv * head_dim, head_dim);
            std::memcpy(pool + dst + (kv ? rd.v_scales : rd.k_scales) + dv * 4,
                        pool + src + (kv ? rs.v_scales : rs.k_scales) + sv * 4, 4);
          } else {
            const int64_t ss = int64_t{layers} * kv_heads * src_cap * head_dim * 2,
                          ds = int64_t{layers} * kv_heads * dst_cap * head_dim * 2;
            std::memcpy(pool + dst + kv * ds + dv * head_dim * 2, pool + src + kv * ss + sv * head_dim * 2,
                        head_dim * 2);
          }
        }
  }
};

TEST_P(AttentionSharedPromptTest, SharedPromptEqualsAPrivateCopyBitForBit) {
  ASSERT_NO_FATAL_FAILURE(testing::RequireDevice());
  const SharedCase c = GetParam();
  const int hd = c.head_dim, H = c.heads, KVH = c.kv_heads, layers = 2, layer = 1;
  const RegionView view{layers, KVH, hd, c.fp8};
  std::mt19937 rng(hd * 13 + H * 5 + KVH + 2 * c.sparse + 3 * c.fp8 + 17 * c.splits + static_cast<int>(c.variant));
  const int lp = 50, n_slots = c.wide ? 300 : 120, count = c.wide ? 250 : c.sparse ? 37 : 80, tail = 2;
  // Tokens: 0 the owner (its own prompt), 1 a whole-prompt sharer, 2 its private
  // twin, 3 a prefix sharer (the last `tail` prompt positions its own), 4 its twin.
  struct Token {
    int shared, cap;
    int64_t offset = 0;  // bytes
  };
  std::vector<Token> tokens = {
      {0, lp + n_slots}, {lp, n_slots}, {0, lp + n_slots}, {lp - tail, tail + n_slots}, {0, lp + n_slots}};
  int64_t bytes = 0;
  for (Token& t : tokens) {
    t.offset = bytes;
    bytes += (view.Bytes(t.cap) + 255) / 256 * 256;
  }
  // Random KV everywhere (fp8: finite codes and positive scales), then the twins
  // made copies of what their sharers read.
  std::vector<uint8_t> pool(bytes);
  std::normal_distribution<float> nd(0.f, 1.f);
  if (c.fp8) {
    for (const Token& t : tokens) {
      const Fp8KvRegion r = Fp8Region(layers, KVH, t.cap, hd);
      for (int64_t i = 0; i < r.k_scales; ++i) pool[t.offset + i] = EncodeE4m3(nd(rng));
      for (int64_t i = r.k_scales; i < r.total; i += 4) {
        const float s = std::exp(0.5f * nd(rng));
        std::memcpy(&pool[t.offset + i], &s, 4);
      }
    }
  } else {
    for (int64_t i = 0; i < bytes; i += 2) {
      const Bf16Bits b = testing::ToBf16Bits(nd(rng));
      std::memcpy(&pool[i], &b, 2);
    }
  }
  const Token& owner = tokens[0];
  for (int p = 0; p < lp; ++p) {
    view.CopyPosition(pool.data(), owner.offset, owner.cap, p, tokens[2].offset, tokens[2].cap, p);
    if (p < lp - tail) view.CopyPosition(pool.data(), owner.offset, owner.cap, p, tokens[4].offset, tokens[4].cap, p);
  }
  for (int p = 0; p < tail; ++p)  // token 3's own prompt tail
    view.CopyPosition(pool.data(), tokens[3].offset, tokens[3].cap, p, tokens[4].offset, tokens[4].cap, lp - tail + p);
  for (int s = 0; s < n_slots; ++s) {
    view.CopyPosition(pool.data(), tokens[1].offset, tokens[1].cap, s, tokens[2].offset, tokens[2].cap, lp + s);
    view.CopyPosition(pool.data(), tokens[3].offset, tokens[3].cap, tail + s, tokens[4].offset, tokens[4].cap, lp + s);
  }

  const int T = static_cast<int>(tokens.size());
  std::vector<TokenMeta> meta(T);
  for (int t = 0; t < T; ++t) {
    TokenMeta& m = meta[t];
    m.kv_offset = tokens[t].offset / 2;
    m.capacity = tokens[t].cap;
    m.kv_index = -1;
    m.prefix_len = lp;
    m.decode_base = lp - tokens[t].shared;
    m.decode_count = count;
    m.flags = (c.sparse ? kTokenSparse : 0) | (c.fp8 ? kTokenKvFp8 : 0);
    m.shared_prompt = tokens[t].shared;
    if (m.shared_prompt > 0) {
      m.prompt_kv_offset = owner.offset / 2;
      m.prompt_capacity = owner.cap;
    }
  }
  // Twins get their sharer's query and slot list.
  std::vector<float> q = testing::RandomFloats(rng, static_cast<size_t>(T) * H * hd, 1.5f);
  for (auto [from, to] : {std::pair{1, 2}, std::pair{3, 4}}) std::copy_n(&q[from * H * hd], H * hd, &q[to * H * hd]);
  const int stride = count;
  std::vector<int32_t> idx(static_cast<size_t>(T) * KVH * stride), counts(static_cast<size_t>(T) * KVH, count);
  for (int t = 0; t < T; ++t)
    for (int h = 0; h < KVH; ++h) {
      std::vector<int32_t> slots(n_slots);
      std::iota(slots.begin(), slots.end(), 0);
      std::shuffle(slots.begin(), slots.end(), rng);
      for (int e = 0; e < count; ++e) idx[(t * KVH + h) * stride + e] = c.sparse ? slots[e] : e;
    }
  for (auto [from, to] : {std::pair{1, 2}, std::pair{3, 4}})
    std::copy_n(&idx[from * KVH * stride], KVH * stride, &idx[to * KVH * stride]);

  std::vector<Bf16Bits> pool_words((bytes + 1) / 2);
  std::memcpy(pool_words.data(), pool.data(), bytes);
  DeviceArray<Bf16Bits> pool_d(pool_words);
  DeviceArray<float> q_d(q);
  DeviceArray<TokenMeta> meta_d(meta);
  DeviceArray<int32_t> idx_d(idx), counts_d(counts);
  DeviceArray<Bf16Bits> out(static_cast<size_t>(T) * H * hd);
  DeviceArray<float> probs(static_cast<size_t>(T) * KVH * stride);
  DeviceArray<int32_t> argmin(static_cast<size_t>(T) * KVH);
  out.Poison();
  probs.Poison();
  argmin.Poison();
  AttentionArgs a;
  a.q = q_d.get();
  a.kv_pool = reinterpret_cast<const __nv_bfloat16*>(pool_d.get());
  a.meta = meta_d.get();
  a.tokens = T;
  a.heads = H;
  a.kv_heads = KVH;
  a.head_dim = hd;
  a.num_layers = layers;
  a.layer = layer;
  a.scale = 1.0f / std::sqrt(static_cast<float>(hd));
  a.decode_idx = idx_d.get();
  a.idx_stride = stride;
  a.counts = counts_d.get();
  a.probs = c.sparse ? probs.get() : nullptr;
  a.probs_stride = c.sparse ? stride : 0;
  a.argmin = c.sparse ? argmin.get() : nullptr;
  a.out = reinterpret_cast<__nv_bfloat16*>(out.get());
  const int max_keys = lp + count;
  a.chunk = ((max_keys + c.splits - 1) / c.splits + 31) / 32 * 32;
  a.splits = (max_keys + a.chunk - 1) / a.chunk;
  ASSERT_EQ(a.splits, c.splits);
  DeviceArray<char> ws(std::max<size_t>(1, AttentionWorkspaceBytes(T, H, hd, a.splits, a.probs_stride)));
  a.workspace = ws.get();
  a.max_keys = max_keys;
  a.variant = c.variant;
  a.kv_formats = (c.fp8 ? kKvFormatsFp8 : kKvFormatsBf16) | kKvSharedPrompts;
  a.sm_count = c.wide ? 132 : 0;
  ASSERT_EQ(ChosenAttentionVariant(a), c.variant) << "the case must run the kernel it names";
  if (c.variant == AttentionVariant::kTwoPass) ASSERT_EQ(TwoPassBlockThreads(a), c.wide ? 256 : 128);
  ARGEN_CUDA_OK(DecodeAttention(a, 0));
  ARGEN_CUDA_OK(cudaDeviceSynchronize());

  const auto out_h = out.Download();
  const auto probs_h = probs.Download();
  const auto argmin_h = argmin.Download();
  for (auto [sharer, twin] : {std::pair{1, 2}, std::pair{3, 4}}) {
    SCOPED_TRACE("token " + std::to_string(sharer));
    bool finite = true;
    for (int i = 0; i < H * hd; ++i)
      finite = finite && std::isfinite(testing::FromBf16Bits(out_h[sharer * H * hd + i]));
    EXPECT_TRUE(finite);
    EXPECT_TRUE(std::equal(&out_h[sharer * H * hd], &out_h[(sharer + 1) * H * hd], &out_h[twin * H * hd]))
        << "output differs from the private copy's";
    if (c.sparse) {
      EXPECT_EQ(0, std::memcmp(&probs_h[sharer * KVH * stride], &probs_h[twin * KVH * stride], 4 * KVH * stride));
      for (int h = 0; h < KVH; ++h) EXPECT_EQ(argmin_h[sharer * KVH + h], argmin_h[twin * KVH + h]);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, AttentionSharedPromptTest,
                         ::testing::Values(SharedCase{128, 4, 4, true, false, 1, AttentionVariant::kTwoPass},
                                           SharedCase{128, 4, 4, false, false, 3, AttentionVariant::kTwoPass},
                                           SharedCase{64, 8, 2, true, false, 2, AttentionVariant::kTwoPass},
                                           SharedCase{128, 16, 2, true, false, 1, AttentionVariant::kWarp},
                                           SharedCase{128, 4, 4, false, false, 1, AttentionVariant::kWarp},
                                           SharedCase{64, 8, 2, true, false, 1, AttentionVariant::kStaged},
                                           SharedCase{128, 4, 4, false, false, 1, AttentionVariant::kStaged},
                                           SharedCase{128, 4, 4, true, true, 1, AttentionVariant::kTwoPass},
                                           SharedCase{128, 16, 2, true, true, 2, AttentionVariant::kTwoPass},
                                           SharedCase{64, 8, 2, false, true, 1, AttentionVariant::kWarp},
                                           SharedCase{128, 4, 4, true, true, 1, AttentionVariant::kWarp},
                                           SharedCase{128, 16, 4, true, false, 2, AttentionVariant::kOnePass},
                                           SharedCase{128, 4, 4, false, false, 1, AttentionVariant::kOnePass},
                                           SharedCase{64, 8, 2, true, true, 1, AttentionVariant::kOnePass},
                                           SharedCase{128, 16, 4, false, true, 3, AttentionVariant::kOnePass},
                                           // 256-thread blocks (their prologue reads the slot lists ahead).
                                           SharedCase{128, 16, 4, true, false, 1, AttentionVariant::kTwoPass, true},
                                           SharedCase{128, 16, 4, false, false, 1, AttentionVariant::kTwoPass, true},
                                           SharedCase{128, 16, 4, true, true, 1, AttentionVariant::kTwoPass, true}),
                         [](const ::testing::TestParamInfo<SharedCase>& info) { return Name(info.param); });

}  // namespace
}  // namespace argen::kernels
