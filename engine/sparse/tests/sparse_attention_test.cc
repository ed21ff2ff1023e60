// CPU sparse decode attention against a naive double-precision reference on
// random inputs, including GQA, no prompt, large logits and head_dim not a
// multiple of 8. Slots not attended hold NaN: a masked dense pass would fail.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "engine/cpu/sparse_attention.h"
#include "gtest/gtest.h"

namespace argen::cpu {
namespace {

struct Case {
  int32_t heads, kv_heads, head_dim, prompt_len, n_slots, stride;
  float magnitude;  // scale of q and k entries (large: logits in the hundreds)
};

void CheckCase(const Case& c, uint32_t seed) {
  SCOPED_TRACE(::testing::Message() << "heads=" << c.heads << " kv=" << c.kv_heads << " d=" << c.head_dim
                                    << " lp=" << c.prompt_len << " slots=" << c.n_slots);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int32_t positions = c.prompt_len + c.n_slots;
  std::vector<float> q(c.heads * c.head_dim), k(c.kv_heads * positions * c.head_dim),
      v(c.kv_heads * positions * c.head_dim, std::numeric_limits<float>::quiet_NaN());
  for (float& x : q) x = c.magnitude * normal(rng);
  std::fill(k.begin(), k.end(), std::numeric_limits<float>::quiet_NaN());

  // Attended slots per kv head: a random subset in random order.
  std::vector<int32_t> attended(c.kv_heads * c.stride, -1), counts(c.kv_heads);
  for (int32_t g = 0; g < c.kv_heads; ++g) {
    std::vector<int32_t> all(c.n_slots);
    for (int32_t s = 0; s < c.n_slots; ++s) all[s] = s;
    std::shuffle(all.begin(), all.end(), rng);
    counts[g] = std::uniform_int_distribution<int32_t>(c.prompt_len > 0 ? 0 : 1, c.stride)(rng);
    for (int32_t i = 0; i < counts[g]; ++i) attended[g * c.stride + i] = all[i];
    // Only the prompt and the attended slots get finite K/V.
    auto fill = [&](int32_t pos) {
      for (int32_t e = 0; e < c.head_dim; ++e) {
        const int64_t idx = (static_cast<int64_t>(g) * positions + pos) * c.head_dim + e;
        k[idx] = c.magnitude * normal(rng);
        v[idx] = normal(rng);
      }
    };
    for (int32_t j = 0; j < c.prompt_len; ++j) fill(j);
    for (int32_t i = 0; i < counts[g]; ++i) fill(c.prompt_len + attended[g * c.stride + i]);
  }

  DecodeAttentionShape shape{c.heads, c.kv_heads, c.head_dim, c.prompt_len, c.n_slots};
  std::vector<float> out(c.heads * c.head_dim), probs(c.kv_heads * c.stride),
      head_probs(c.heads * (c.prompt_len + c.stride)), scratch(DecodeAttentionScratchFloats(shape, c.stride));
  DecodeAttentionIo io;
  io.q = q.data();
  io.k = k.data();
  io.v = v.data();
  io.attended = attended.data();
  io.counts = counts.data();
  io.attended_stride = c.stride;
  io.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  io.out = out.data();
  io.attended_probs = probs.data();
  io.head_probs = head_probs.data();
  io.scratch = scratch.data();
  DecodeAttention(shape, io);

  const int32_t group = c.heads / c.kv_heads;
  for (int32_t g = 0; g < c.kv_heads; ++g) {
    std::vector<double> mean_probs(counts[g], 0.0);
    for (int32_t h = g * group; h < (g + 1) * group; ++h) {
      // Keys in order: prompt, then attended slots.
      std::vector<int32_t> key_pos;
      for (int32_t j = 0; j < c.prompt_len; ++j) key_pos.push_back(j);
      for (int32_t i = 0; i < counts[g]; ++i) key_pos.push_back(c.prompt_len + attended[g * c.stride + i]);
      std::vector<double> logit(key_pos.size());
      double mx = -1e300;
      for (size_t j = 0; j < key_pos.size(); ++j) {
        double dot = 0;
        for (int32_t e = 0; e < c.head_dim; ++e) {
          dot += static_cast<double>(q[h * c.head_dim + e]) *
                 k[(static_cast<int64_t>(g) * positions + key_pos[j]) * c.head_dim + e];
        }
        logit[j] = dot / std::sqrt(static_cast<double>(c.head_dim));
        mx = std::max(mx, logit[j]);
      }
      double sum = 0;
      for (double& x : logit) sum += (x = std::exp(x - mx));
      for (int32_t e = 0; e < c.head_dim; ++e) {
        double o = 0;
        for (size_t j = 0; j < key_pos.size(); ++j) {
          o += logit[j] / sum * v[(static_cast<int64_t>(g) * positions + key_pos[j]) * c.head_dim + e];
        }
        ASSERT_TRUE(std::isfinite(out[h * c.head_dim + e]));
        EXPECT_NEAR(out[h * c.head_dim + e], o, 2e-5 + 2e-5 * std::abs(o)) << "h=" << h << " e=" << e;
      }
      for (size_t j = 0; j < key_pos.size(); ++j) {
        EXPECT_NEAR(head_probs[h * (c.prompt_len + c.stride) + j], logit[j] / sum, 2e-6) << "h=" << h;
      }
      for (int32_t i = 0; i < counts[g]; ++i) mean_probs[i] += logit[c.prompt_len + i] / sum / group;
    }
    for (int32_t i = 0; i < counts[g]; ++i) EXPECT_NEAR(probs[g * c.stride + i], mean_probs[i], 2e-6);
  }
}

TEST(SparseDecodeAttention, MatchesDoublePrecisionReference) {
  const Case cases[] = {
      {4, 4, 16, 5, 9, 6, 1.0f},         // MHA
      {8, 2, 32, 7, 20, 11, 1.0f},       // GQA, groups of 4
      {2, 1, 13, 0, 5, 5, 1.0f},         // no prompt, odd head_dim
      {3, 3, 8, 12, 4, 4, 1.0f},         // all slots
      {4, 2, 64, 10, 30, 8, 6.0f},       // logits in the hundreds: stable softmax
      {16, 16, 128, 50, 288, 29, 1.0f},  // Janus-Pro-1B shape, diagonal at 95%
  };
  uint32_t seed = 1;
  for (const Case& c : cases) {
    for (int rep = 0; rep < 3; ++rep) CheckCase(c, seed++);
  }
}

}  // namespace
}  // namespace argen::cpu
