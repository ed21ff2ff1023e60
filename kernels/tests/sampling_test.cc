// Device CFG sampling against the host reference sampler (engine/model/sampler.h)
// with the same counter-based uniforms.
#include "kernels/sampling.h"

#include <gtest/gtest.h>

#include "engine/model/sampler.h"
#include "kernels/sampling_rng.h"
#include "kernels/tests/cuda_test_util.h"

namespace argen::kernels {
namespace {

using testing::DeviceArray;

TEST(CfgSampleTest, MatchesHostSamplerTokenForToken) {
  ASSERT_NO_FATAL_FAILURE(testing::RequireDevice());
  const int vocab = 16384;
  std::mt19937 rng(99);
  // Settings per pair: plain, temperature, top-k, top-p, both; several seeds and steps.
  std::vector<PairSampling> params;
  for (int rep = 0; rep < 8; ++rep) {
    const float temps[] = {1.0f, 0.7f, 1.3f, 1.0f, 0.9f};
    const int ks[] = {0, 0, 50, 0, 200};
    const float ps[] = {1.0f, 1.0f, 1.0f, 0.9f, 0.8f};
    for (int s = 0; s < 5; ++s) {
      PairSampling p;
      p.temperature = temps[s];
      p.top_k = ks[s];
      p.top_p = ps[s];
      p.cfg_weight = rep % 2 ? 5.0f : 1.5f;
      p.seed = 1000003ULL * rep + (static_cast<uint64_t>(s) << 40);
      p.image_index = rep % 3;
      p.step = rep * 37 + s;
      params.push_back(p);
    }
  }
  const int pairs = params.size();
  auto logits = testing::RandomFloats(rng, static_cast<size_t>(2) * pairs * vocab, 2.0f);
  DeviceArray<float> logits_d(logits);
  DeviceArray<PairSampling> params_d(params);
  DeviceArray<int32_t> tokens(pairs);
  tokens.Poison();
  ARGEN_CUDA_OK(CfgSample(logits_d.get(), pairs, vocab, params_d.get(), tokens.get(), 0));
  ARGEN_CUDA_OK(cudaDeviceSynchronize());
  const auto got = tokens.Download();
  model::HostSampler host(vocab);
  for (int i = 0; i < pairs; ++i) {
    model::SamplingSpec spec;
    spec.temperature = params[i].temperature;
    spec.top_k = params[i].top_k;
    spec.top_p = params[i].top_p;
    spec.cfg_weight = params[i].cfg_weight;
    spec.seed = params[i].seed;
    spec.image_index = params[i].image_index;
    const float u = kernels::SampleUniform(spec.seed, spec.image_index, params[i].step);
    const int want = host.Sample(&logits[2 * i * vocab], &logits[(2 * i + 1) * vocab], spec, u);
    EXPECT_EQ(got[i], want) << "pair " << i << " top_k " << spec.top_k << " top_p " << spec.top_p;
    ASSERT_GT(host.last_probs()[got[i]], 0.f) << "drew a filtered token";
  }
}

// temperature 0: the argmax of the guided logits on the device, as on the
// host, ties to the lowest index (planted), whatever top_k / top_p / seed say;
// in a batch mixed with sampled pairs. Vocabularies of Janus (16384) and of a
// Chameleon image range (8192), and one that is not a multiple of the block.
TEST(CfgSampleTest, TemperatureZeroIsTheHostArgmax) {
  ASSERT_NO_FATAL_FAILURE(testing::RequireDevice());
  std::mt19937 rng(5);
  for (int vocab : {16384, 8192, 1000}) {
    std::vector<PairSampling> params(6);
    for (size_t i = 0; i < params.size(); ++i) {
      params[i].temperature = i == 3 ? 1.0f : 0.0f;  // one sampled pair among greedy ones
      params[i].top_k = static_cast<int32_t>(i) * 7;
      params[i].top_p = i % 2 ? 0.5f : 1.0f;
      params[i].cfg_weight = i == 4 ? 0.0f : 3.0f;
      params[i].seed = 77 + i;
      params[i].step = static_cast<int32_t>(i);
    }
    const int pairs = params.size();
    auto logits = testing::RandomFloats(rng, static_cast<size_t>(2) * pairs * vocab, 2.0f);
    // Pair 5: the maximum twice (cond == uncond there, so the guided logit is exact); the first wins.
    for (int v : {vocab - 3, 40}) logits[(2 * 5) * vocab + v] = logits[(2 * 5 + 1) * vocab + v] = 50.0f;
    DeviceArray<float> logits_d(logits);
    DeviceArray<PairSampling> params_d(params);
    DeviceArray<int32_t> tokens(pairs);
    tokens.Poison();
    ARGEN_CUDA_OK(CfgSample(logits_d.get(), pairs, vocab, params_d.get(), tokens.get(), 0));
    ARGEN_CUDA_OK(cudaDeviceSynchronize());
    const auto got = tokens.Download();
    model::HostSampler host(vocab);
    for (int i = 0; i < pairs; ++i) {
      model::SamplingSpec spec;
      spec.temperature = params[i].temperature;
      spec.top_k = params[i].top_k;
      spec.top_p = params[i].top_p;
      spec.cfg_weight = params[i].cfg_weight;
      spec.seed = params[i].seed;
      const float u = kernels::SampleUniform(spec.seed, 0, params[i].step);
      EXPECT_EQ(got[i], host.Sample(&logits[2 * i * vocab], &logits[(2 * i + 1) * vocab], spec, u))
          << "vocab " << vocab << " pair " << i;
    }
    EXPECT_EQ(got[5], 40) << "ties go to the lowest index";
  }
}

TEST(CfgSampleTest, RejectsOversizedVocabulary) {
  ASSERT_NO_FATAL_FAILURE(testing::RequireDevice());
  EXPECT_EQ(CfgSample(nullptr, 1, kMaxSampleVocab + 1, nullptr, nullptr, 0), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace argen::kernels
