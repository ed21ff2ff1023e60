// Speculative Jacobi decoding's acceptance math (engine/model/speculative.h)
// against exact sequential sampling: a small context-dependent model (3
// image tokens, logits from the whole prefix) is decoded many times with
// different seeds, and the frequency of every whole token sequence must match
// the exact probability sequential sampling gives it (enumerated). A wrong
// acceptance rule (accepting always, accepting with p alone, resampling from
// p instead of the residual, conditioning on the wrong inputs) moves some
// sequence's mass by far more than the tolerance.
#include "engine/model/speculative.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "kernels/sampling_rng.h"

namespace argen::model {
namespace {

constexpr int32_t kVocab = 3;
constexpr int32_t kOffset = 10;  // input id = kOffset + logit index
constexpr int32_t kTokens = 5;   // token 0 is given; 1..4 are decoded

// Logits of the token after `context` (logit indices): a function of the
// last token, the prefix sum and the position, so every earlier input counts.
struct TinyModel {
  void Logits(const std::vector<int32_t>& context, float* cond, float* uncond) const {
    const int32_t last = context.back();
    int32_t sum = 0;
    for (int32_t c : context) sum += c;
    const int32_t len = static_cast<int32_t>(context.size());
    for (int32_t v = 0; v < kVocab; ++v) {
      cond[v] = 1.3f * std::sin(1.7f * static_cast<float>(last * kVocab + v + 1)) +
                0.9f * std::cos(2.3f * static_cast<float>((sum % 3) * kVocab + v)) +
                0.5f * static_cast<float>((len + v) % 3);
      uncond[v] = 0.4f * std::cos(static_cast<float>(last + 2 * v));
    }
  }
};

// The exact sequential probability of every sequence of tokens 1..kTokens-1
// (logit indices) after token 0 = `first`.
std::map<std::vector<int32_t>, double> ExactSequences(const TinyModel& model, const SamplingSpec& spec,
                                                      const std::vector<int32_t>& forced, int32_t first) {
  std::map<std::vector<int32_t>, double> out;
  HostSampler sampler(kVocab);
  std::vector<float> cond(kVocab), uncond(kVocab);
  std::function<void(std::vector<int32_t>&, double)> walk = [&](std::vector<int32_t>& seq, double prob) {
    const int32_t k = static_cast<int32_t>(seq.size());
    if (k == kTokens) {
      out[std::vector<int32_t>(seq.begin() + 1, seq.end())] += prob;
      return;
    }
    if (forced[k] >= 0) {
      seq.push_back(forced[k] - kOffset);
      walk(seq, prob);
      seq.pop_back();
      return;
    }
    model.Logits(seq, cond.data(), uncond.data());
    sampler.Sample(cond.data(), uncond.data(), spec, 0.5f);
    const std::vector<float> p = sampler.last_probs();
    for (int32_t v = 0; v < kVocab; ++v) {
      if (p[v] <= 0) continue;
      seq.push_back(v);
      walk(seq, prob * p[v]);
      seq.pop_back();
    }
  };
  std::vector<int32_t> seq{first};
  walk(seq, 1.0);
  return out;
}

// Decodes one image speculatively; returns tokens 1..kTokens-1 (logit indices).
std::vector<int32_t> DecodeSpeculatively(const TinyModel& model, const SamplingSpec& spec, int32_t window,
                                         const std::vector<int32_t>& forced, int32_t first, int32_t* passes) {
  SpeculativeImage image(kTokens, window, kVocab, kOffset, forced, spec);
  image.Start(kOffset + first);
  HostSampler sampler(kVocab);
  std::vector<float> logits;
  while (!image.done()) {
    const int32_t n = image.queries();
    EXPECT_GE(n, 1);
    logits.assign(static_cast<size_t>(2 * n * kVocab), 0.0f);
    // Query j sees the made tokens before the first query, then inputs 0..j.
    std::vector<int32_t> context;
    for (int32_t k = 0; k < image.first_index(); ++k) context.push_back(image.tokens()[k] - kOffset);
    for (int32_t j = 0; j < n; ++j) {
      context.push_back(image.input(j) - kOffset);
      model.Logits(context, logits.data() + 2 * j * kVocab, logits.data() + (2 * j + 1) * kVocab);
    }
    const int32_t before = image.made();
    image.Verify(logits.data(), sampler);
    EXPECT_GT(image.made(), before);  // every pass makes at least one token
    EXPECT_LE(image.made(), before + n);
  }
  *passes = image.passes();
  std::vector<int32_t> out;
  for (int32_t k = 1; k < kTokens; ++k) out.push_back(image.tokens()[k] - kOffset);
  return out;
}

// Runs `seeds` images and checks every sequence's frequency against the
// exact probability: |freq - p| <= 5 standard errors + 0.002.
void ExpectExactDistribution(const SamplingSpec& base, int32_t window, const std::vector<int32_t>& forced,
                             int32_t seeds, double* mean_passes) {
  const TinyModel model;
  const int32_t first = 1;
  const std::map<std::vector<int32_t>, double> exact = ExactSequences(model, base, forced, first);
  std::map<std::vector<int32_t>, int32_t> counts;
  int64_t passes_total = 0;
  for (int32_t s = 0; s < seeds; ++s) {
    SamplingSpec spec = base;
    spec.seed = 1000 + static_cast<uint64_t>(s);
    int32_t passes = 0;
    ++counts[DecodeSpeculatively(model, spec, window, forced, first, &passes)];
    passes_total += passes;
  }
  for (const auto& [seq, count] : counts) {
    EXPECT_TRUE(exact.contains(seq)) << "a sequence sequential sampling never makes";
  }
  for (const auto& [seq, p] : exact) {
    const auto it = counts.find(seq);
    const double freq = it == counts.end() ? 0.0 : static_cast<double>(it->second) / seeds;
    const double tolerance = 5.0 * std::sqrt(p * (1 - p) / seeds) + 0.002;
    EXPECT_NEAR(freq, p, tolerance) << "sequence " << seq[0] << seq[1] << seq[2] << seq[3] << " window " << window;
  }
  *mean_passes = static_cast<double>(passes_total) / seeds;
}

SamplingSpec Spec(float temperature, int32_t top_k, float top_p, float cfg) {
  SamplingSpec s;
  s.temperature = temperature;
  s.top_k = top_k;
  s.top_p = top_p;
  s.cfg_weight = cfg;
  s.image_index = 2;
  return s;
}

TEST(SpeculativeTest, TokenSequencesAreDistributedAsSequentialSampling) {
  const std::vector<int32_t> none(kTokens, -1);
  for (int32_t window : {2, 4, 5}) {
    double passes = 0;
    ExpectExactDistribution(Spec(1.0f, 0, 1.0f, 2.0f), window, none, 20000, &passes);
    EXPECT_LT(passes, kTokens - 1) << "window " << window << ": no draft ever accepted";
  }
}

TEST(SpeculativeTest, ExactUnderTemperatureTopKAndTopP) {
  const std::vector<int32_t> none(kTokens, -1);
  double passes = 0;
  ExpectExactDistribution(Spec(0.7f, 2, 1.0f, 3.0f), 4, none, 20000, &passes);
  ExpectExactDistribution(Spec(1.5f, 0, 0.8f, 1.0f), 3, none, 20000, &passes);
}

TEST(SpeculativeTest, ForcedTokensAreTakenAndTheRestStaysExact) {
  std::vector<int32_t> forced(kTokens, -1);
  forced[2] = kOffset + 2;
  double passes = 0;
  ExpectExactDistribution(Spec(1.0f, 0, 1.0f, 2.0f), 4, forced, 20000, &passes);
}

// A window of 1 feeds no drafts: every token is the sequential draw itself,
// SampleUniform(seed, image, token), so the tokens equal sequential decoding's.
TEST(SpeculativeTest, WindowOneIsSequentialDecodingExactly) {
  const TinyModel model;
  const std::vector<int32_t> none(kTokens, -1);
  HostSampler sampler(kVocab);
  std::vector<float> cond(kVocab), uncond(kVocab);
  for (uint64_t seed = 0; seed < 50; ++seed) {
    SamplingSpec spec = Spec(1.0f, 0, 1.0f, 2.0f);
    spec.seed = seed;
    std::vector<int32_t> sequential{1};
    for (int32_t k = 1; k < kTokens; ++k) {
      model.Logits(sequential, cond.data(), uncond.data());
      sequential.push_back(sampler.Sample(cond.data(), uncond.data(), spec,
                                          kernels::SampleUniform(seed, static_cast<uint32_t>(spec.image_index), k)));
    }
    int32_t passes = 0;
    EXPECT_EQ(DecodeSpeculatively(model, spec, 1, none, 1, &passes),
              std::vector<int32_t>(sequential.begin() + 1, sequential.end()));
    EXPECT_EQ(passes, kTokens - 1);
  }
}

// Greedy (temperature 0): Jacobi decoding's fixed point, the argmax chain,
// in fewer passes than tokens once drafts converge.
TEST(SpeculativeTest, GreedyMakesTheArgmaxChain) {
  const TinyModel model;
  const std::vector<int32_t> none(kTokens, -1);
  const SamplingSpec spec = Spec(0.0f, 0, 1.0f, 2.0f);
  const std::map<std::vector<int32_t>, double> exact = ExactSequences(model, spec, none, 1);
  ASSERT_EQ(exact.size(), 1u);
  int32_t passes = 0;
  EXPECT_EQ(DecodeSpeculatively(model, spec, 4, none, 1, &passes), exact.begin()->first);
}

TEST(SpeculativeTest, SameSeedSameTokensAndCountsAddUp) {
  const TinyModel model;
  const std::vector<int32_t> none(kTokens, -1);
  SamplingSpec spec = Spec(1.0f, 0, 1.0f, 2.0f);
  spec.seed = 77;
  int32_t a_passes = 0, b_passes = 0;
  EXPECT_EQ(DecodeSpeculatively(model, spec, 4, none, 1, &a_passes),
            DecodeSpeculatively(model, spec, 4, none, 1, &b_passes));
  EXPECT_EQ(a_passes, b_passes);
}

}  // namespace
}  // namespace argen::model
