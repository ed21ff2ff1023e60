// The counter-based RNG (Philox4x32-10 known-answer vectors from Random123)
// and the host sampler's semantics (engine/model/sampler.h).
#include <cmath>
#include <set>
#include <vector>

#include "engine/model/sampler.h"
#include "gtest/gtest.h"
#include "kernels/sampling_rng.h"

namespace argen::model {
namespace {
using kernels::Philox4x32;
using kernels::Philox4x32_10;
using kernels::SampleUniform;

TEST(PhiloxTest, KnownAnswerVectors) {
  struct Kat {
    Philox4x32 counter;
    uint32_t key0, key1;
    Philox4x32 expected;
  };
  const Kat kats[] = {
      {{{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}}},
      {{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}},
       0xffffffffu,
       0xffffffffu,
       {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}}},
      {{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}},
       0xa4093822u,
       0x299f31d0u,
       {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}}},
  };
  for (const Kat& k : kats) {
    const Philox4x32 out = Philox4x32_10(k.counter, k.key0, k.key1);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out.v[i], k.expected.v[i]) << i;
  }
}

TEST(PhiloxTest, UniformsDependOnSeedImageAndStepOnly) {
  std::set<float> seen;
  double sum = 0.0, sum_sq = 0.0;
  int n = 0;
  for (uint64_t seed : {0ull, 1ull, 0x100000000ull}) {
    for (uint32_t image = 0; image < 4; ++image) {
      for (uint32_t step = 0; step < 576; ++step) {
        const float u = SampleUniform(seed, image, step);
        EXPECT_EQ(u, SampleUniform(seed, image, step));
        ASSERT_GE(u, 0.0f);
        ASSERT_LT(u, 1.0f);
        seen.insert(u);
        sum += u;
        sum_sq += double{u} * u;
        ++n;
      }
    }
  }
  EXPECT_GT(seen.size(), static_cast<size_t>(n * 0.99));  // the high seed word matters too
  EXPECT_NEAR(sum / n, 0.5, 0.01);
  EXPECT_NEAR(sum_sq / n - (sum / n) * (sum / n), 1.0 / 12.0, 0.005);
}

TEST(HostSamplerTest, InverseCdfFollowsTheDistribution) {
  const std::vector<float> cond = {0.0f, 1.0f, 2.0f, -1.0f, 0.5f};
  const std::vector<float> uncond = {0.5f, 0.0f, 1.0f, 0.0f, 0.0f};
  HostSampler sampler(5);
  SamplingSpec spec;
  spec.cfg_weight = 2.0f;
  spec.temperature = 1.5f;
  std::vector<int> counts(5, 0);
  const int draws = 200000;
  for (int i = 0; i < draws; ++i) counts[sampler.Sample(cond.data(), uncond.data(), spec, (i + 0.5f) / draws)]++;
  std::vector<double> expected(5);
  double z = 0.0;
  for (int v = 0; v < 5; ++v) {
    expected[v] = std::exp((uncond[v] + 2.0 * (cond[v] - uncond[v])) / 1.5);
    z += expected[v];
  }
  for (int v = 0; v < 5; ++v) {
    EXPECT_NEAR(counts[v] / static_cast<double>(draws), expected[v] / z, 1e-3) << v;
    EXPECT_NEAR(sampler.last_probs()[v], expected[v] / z, 1e-6) << v;
  }
}

TEST(HostSamplerTest, TopKOneIsArgmaxAndTopPKeepsTheHead) {
  const std::vector<float> logits = {0.1f, 3.0f, 2.9f, -5.0f, 1.0f, 2.0f};
  HostSampler sampler(6);
  SamplingSpec spec;
  spec.cfg_weight = 1.0f;  // logits = cond
  spec.top_k = 1;
  for (float u : {0.0f, 0.3f, 0.9999f}) EXPECT_EQ(sampler.Sample(logits.data(), logits.data(), spec, u), 1);
  spec.top_k = 0;
  spec.top_p = 0.5f;  // tokens 1 and 2 hold ~0.47 and ~0.43 of the mass: both needed
  std::set<int32_t> drawn;
  for (int i = 0; i < 100; ++i) drawn.insert(sampler.Sample(logits.data(), logits.data(), spec, i / 100.0f));
  EXPECT_EQ(drawn, (std::set<int32_t>{1, 2}));
}

// temperature 0 is greedy: the first index of the largest guided logit, for
// every uniform and whatever top_k / top_p say (#15: it was refused before).
TEST(HostSamplerTest, TemperatureZeroIsTheArgmaxOfTheGuidedLogits) {
  const std::vector<float> cond = {0.0f, 2.0f, 1.0f, 3.0f, 3.0f};
  const std::vector<float> uncond = {0.0f, 0.0f, 1.5f, 1.0f, 1.0f};
  HostSampler sampler(5);
  SamplingSpec spec;
  spec.temperature = 0.0f;
  spec.cfg_weight = 2.0f;  // guided: 0, 4, 0.5, 5, 5 -> token 3 (the first of the tie)
  for (float u : {0.0f, 0.5f, 0.9999f}) EXPECT_EQ(sampler.Sample(cond.data(), uncond.data(), spec, u), 3);
  EXPECT_EQ(sampler.last_probs(), (std::vector<float>{0, 0, 0, 1, 0}));
  spec.cfg_weight = 0.0f;  // the unconditional logits alone: token 2
  spec.top_k = 1;
  spec.top_p = 0.1f;
  EXPECT_EQ(sampler.Sample(cond.data(), uncond.data(), spec, 0.7f), 2);
  const float nan = std::nanf("");
  const std::vector<float> bad = {nan, -INFINITY, nan, -INFINITY, nan};
  EXPECT_EQ(sampler.Sample(bad.data(), bad.data(), spec, 0.5f), 0);  // nothing beats -inf: the first token
}

TEST(SamplingRangesTest, OneSetOfBoundsWithOpenAndClosedEnds) {
  EXPECT_TRUE(CheckTemperature(0).ok());
  EXPECT_TRUE(CheckTemperature(100).ok());
  EXPECT_FALSE(CheckTemperature(100.001).ok());
  EXPECT_FALSE(CheckTemperature(-0.001).ok());
  EXPECT_FALSE(CheckTemperature(std::nan("")).ok());
  EXPECT_TRUE(CheckCfgWeight(0).ok());
  EXPECT_TRUE(CheckCfgWeight(100).ok());
  EXPECT_FALSE(CheckCfgWeight(100.5).ok());
  EXPECT_FALSE(CheckCfgWeight(INFINITY).ok());
  EXPECT_TRUE(CheckTopP(1).ok());
  EXPECT_FALSE(CheckTopP(0).ok());
  EXPECT_TRUE(CheckTopK(16, 16).ok());
  EXPECT_FALSE(CheckTopK(17, 16).ok());
  EXPECT_FALSE(CheckTopK(-1, 16).ok());
  EXPECT_TRUE(CheckTopK(1 << 20, 0).ok());  // no vocabulary bound given
}

}  // namespace
}  // namespace argen::model
