// The CPU flow-matching head against the official FlowMatchingHead
// (tests/goldens/tiny/tiny-nextstep, tools/goldens/make_nextstep_goldens.py):
// the velocity net, and a whole sampled token with the official sampler's
// recorded noise injected. Also: the device description (Describe, what the
// CUDA backend builds its head from) alone, interpreted on the host, samples
// the head's tokens.
#include "engine/families/nextstep/flow_head.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <span>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "gtest/gtest.h"
#include "tests/support/golden_files.h"

namespace argen::nextstep {
namespace {

using test_support::ReadF32;
using test_support::ReadJson;
using test_support::RelativeError;
using test_support::SourceDir;

const char kRel[] = "tests/goldens/tiny/tiny-nextstep";

std::string Dir() { return SourceDir() + "/" + kRel; }

class FlowHeadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    golden_ = ReadJson(std::string(kRel) + "/goldens.json");
    dims_.token_dim = golden_["token_dim"];
    dims_.cond_dim = golden_["cond_dim"];
    dims_.width = golden_["width"];
    dims_.blocks = golden_["blocks"];
    absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::Checkpoint::Open(Dir());
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    checkpoint_ = *std::move(ckpt);
    absl::StatusOr<std::unique_ptr<FlowHead>> head =
        FlowHead::Load([this](const std::string& name,
                              const std::vector<int64_t>& shape) { return checkpoint_->LoadF32(name, shape); },
                       "image_head.net.", dims_);
    ASSERT_TRUE(head.ok()) << head.status();
    head_ = *std::move(head);
  }

  nlohmann::json golden_;
  FlowHeadDims dims_;
  std::unique_ptr<checkpoint::Checkpoint> checkpoint_;
  std::unique_ptr<FlowHead> head_;
};

TEST_F(FlowHeadTest, VelocityMatchesOfficialNet) {
  const nlohmann::json& g = golden_["velocity"];
  const int32_t rows = g["rows"];
  const std::vector<float> x = ReadF32(Dir() + "/" + g["x"].get<std::string>());
  const std::vector<float> c = ReadF32(Dir() + "/" + g["c"].get<std::string>());
  const std::vector<float> want = ReadF32(Dir() + "/" + g["out"].get<std::string>());
  ASSERT_EQ(want.size(), static_cast<size_t>(rows) * dims_.token_dim);
  std::vector<float> v(want.size());
  head_->Velocity(x.data(), g["t"].get<float>(), c.data(), rows, v.data());
  EXPECT_LT(RelativeError(v.data(), want), 1e-5);
}

TEST_F(FlowHeadTest, SampledTokenMatchesOfficialSamplerWithItsNoise) {
  const nlohmann::json& g = golden_["sample"];
  const int32_t pairs = g["pairs"];
  FlowSampling s;
  s.steps = g["steps"];
  s.cfg = g["cfg"];
  s.timesteps_shift = g["timesteps_shift"];
  s.last_step_size = g["last_step_size"];
  s.normalize = g["normalize"];
  const std::vector<float> cond = ReadF32(Dir() + "/" + g["cond"].get<std::string>());
  const std::vector<float> uncond = ReadF32(Dir() + "/" + g["uncond"].get<std::string>());
  const std::vector<float> noise = ReadF32(Dir() + "/" + g["noise"].get<std::string>());  // [draw][pair][dim]
  const std::vector<float> want = ReadF32(Dir() + "/" + g["tokens"].get<std::string>());
  const int32_t D = dims_.token_dim;
  ASSERT_EQ(noise.size(), static_cast<size_t>(s.steps) * pairs * D);
  std::set<std::pair<int32_t, int32_t>> drawn;
  const NoiseFn recorded = [&](int32_t pair, int32_t draw, float* out) {
    drawn.insert({pair, draw});
    const float* src = noise.data() + (static_cast<size_t>(draw) * pairs + pair) * D;
    std::copy(src, src + D, out);
  };
  std::vector<float> tokens(static_cast<size_t>(pairs) * D);
  ASSERT_TRUE(head_->Sample(cond.data(), uncond.data(), pairs, s, recorded, tokens.data()).ok());
  EXPECT_EQ(drawn.size(), static_cast<size_t>(pairs) * s.steps);  // every draw used, once per (pair, draw)
  EXPECT_LT(RelativeError(tokens.data(), want), 1e-4);
}

TEST_F(FlowHeadTest, KeyedNoiseReproducesAndDependsOnEveryKey) {
  FlowSampling s;
  s.steps = 4;
  const int32_t D = dims_.token_dim;
  std::vector<float> cond(2 * dims_.cond_dim), uncond(2 * dims_.cond_dim);
  for (size_t i = 0; i < cond.size(); ++i) {
    cond[i] = std::sin(0.1f * i);
    uncond[i] = std::cos(0.3f * i);
  }
  auto sample = [&](uint64_t seed, std::vector<uint32_t> images, uint32_t token) {
    const int32_t pairs = static_cast<int32_t>(images.size());
    std::vector<float> t(static_cast<size_t>(pairs) * D);
    EXPECT_TRUE(head_->Sample(cond.data(), uncond.data(), pairs, s, KeyedNoise(seed, images, token, D), t.data()).ok());
    return t;
  };
  const std::vector<float> base = sample(7, {0, 1}, 3);
  EXPECT_EQ(base, sample(7, {0, 1}, 3));
  EXPECT_NE(base, sample(8, {0, 1}, 3));
  EXPECT_NE(base, sample(7, {0, 1}, 4));
  EXPECT_NE(base, sample(7, {0, 2}, 3));
  // A pair's token depends on its own image index, not on the other pairs of the call.
  const std::vector<float> alone = sample(7, {0}, 3);
  EXPECT_LT(RelativeError(alone.data(), base.data(), D), 1e-5);
}

TEST(KeyedNoiseTest, StandardNormalMoments) {
  const int32_t D = 64, draws = 400;
  const NoiseFn noise = KeyedNoise(123, {5}, 9, D);
  std::vector<float> out(D);
  double sum = 0, sq = 0;
  for (int32_t d = 0; d < draws; ++d) {
    noise(0, d, out.data());
    for (float v : out) {
      ASSERT_TRUE(std::isfinite(v));
      sum += v;
      sq += double{v} * v;
    }
  }
  const double n = double{D} * draws;
  EXPECT_NEAR(sum / n, 0.0, 0.03);
  EXPECT_NEAR(sq / n, 1.0, 0.05);
}

TEST_F(FlowHeadTest, BadSamplingSettingsAreRefused) {
  std::vector<float> cond(dims_.cond_dim), tokens(dims_.token_dim);
  const NoiseFn noise = KeyedNoise(1, {0}, 0, dims_.token_dim);
  FlowSampling s;
  s.steps = 1;
  EXPECT_EQ(head_->Sample(cond.data(), cond.data(), 1, s, noise, tokens.data()).code(),
            absl::StatusCode::kInvalidArgument);
  s = FlowSampling{};
  s.last_step_size = 1.0f;
  EXPECT_EQ(head_->Sample(cond.data(), cond.data(), 1, s, noise, tokens.data()).code(),
            absl::StatusCode::kInvalidArgument);
  s = FlowSampling{};  // cfg 7.5 needs the unconditional rows
  EXPECT_EQ(head_->Sample(cond.data(), nullptr, 1, s, noise, tokens.data()).code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(FlowHeadTest, MissingTensorIsNamed) {
  FlowHeadDims wrong = dims_;
  wrong.blocks = dims_.blocks + 1;
  absl::StatusOr<std::unique_ptr<FlowHead>> head = FlowHead::Load(
      [this](const std::string& name, const std::vector<int64_t>& shape) { return checkpoint_->LoadF32(name, shape); },
      "image_head.net.", wrong);
  ASSERT_FALSE(head.ok());
  EXPECT_NE(head.status().message().find(absl::StrCat("res_blocks.", dims_.blocks)), std::string::npos)
      << head.status();
}

// The sampler as engine/model/flow_matching_head.h states it, from the
// description alone (double accumulation; one pair): what the CUDA backend's
// DeviceFlowHead computes.
std::vector<float> SampleFromDescription(const model::FlowMatchingHeadDesc& d, const float* cond, const float* uncond,
                                         float cfg, const NoiseFn& noise) {
  using Linear = model::FlowMatchingHeadDesc::Linear;
  const int32_t W = d.width, D = d.token_dim;
  const auto apply = [](const Linear& l, const float* x, float* out) {
    for (int32_t o = 0; o < l.out; ++o) {
      double acc = l.bias[o];
      for (int32_t i = 0; i < l.in; ++i) acc += double{l.weight[static_cast<size_t>(o) * l.in + i]} * x[i];
      out[o] = static_cast<float>(acc);
    }
  };
  const auto layer_norm = [](const float* x, int32_t n, std::span<const float> w, std::span<const float> b,
                             float* out) {
    double mean = 0, var = 0;
    for (int32_t i = 0; i < n; ++i) mean += x[i];
    mean /= n;
    for (int32_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
    const double inv = 1.0 / std::sqrt(var / n + 1e-6);
    for (int32_t i = 0; i < n; ++i) {
      const double y = (x[i] - mean) * inv;
      out[i] = static_cast<float>(w.empty() ? y : y * w[i] + b[i]);
    }
  };
  const auto silu = [](float v) { return v / (1.0f + std::exp(-v)); };
  std::vector<float> c_emb[2] = {std::vector<float>(W), std::vector<float>(W)};
  apply(d.cond_embed, cond, c_emb[0].data());
  apply(d.cond_embed, uncond, c_emb[1].data());
  const auto velocity = [&](const std::vector<float>& x, int32_t k, const std::vector<float>& ce) {
    std::vector<float> sy(W), h(W), hn(W), a(W), b(W), mod(3 * W), v(D);
    for (int32_t i = 0; i < W; ++i) sy[i] = silu(d.time_embeddings[static_cast<size_t>(k) * W + i] + ce[i]);
    apply(d.input_proj, x.data(), h.data());
    for (const model::FlowMatchingHeadDesc::Block& blk : d.blocks) {
      apply(blk.ada, sy.data(), mod.data());
      layer_norm(h.data(), W, blk.ln_weight, blk.ln_bias, hn.data());
      for (int32_t i = 0; i < W; ++i) hn[i] = hn[i] * (1.0f + mod[W + i]) + mod[i];
      apply(blk.fc1, hn.data(), a.data());
      for (float& e : a) e = silu(e);
      apply(blk.fc2, a.data(), b.data());
      for (int32_t i = 0; i < W; ++i) h[i] += mod[2 * W + i] * b[i];
    }
    apply(d.final_ada, sy.data(), mod.data());
    layer_norm(h.data(), W, {}, {}, hn.data());
    for (int32_t i = 0; i < W; ++i) hn[i] = hn[i] * (1.0f + mod[W + i]) + mod[i];
    apply(d.final_linear, hn.data(), v.data());
    return v;
  };
  const auto guided = [&](const std::vector<float>& x, int32_t k) {
    std::vector<float> v = velocity(x, k, c_emb[0]);
    if (cfg > 1.0f) {
      const std::vector<float> u = velocity(x, k, c_emb[1]);
      for (int32_t i = 0; i < D; ++i) v[i] = u[i] + cfg * (v[i] - u[i]);
    }
    return v;
  };
  const int32_t S = static_cast<int32_t>(d.times.size());
  std::vector<float> x(D), w(D);
  noise(0, 0, x.data());
  for (int32_t k = 0; k + 1 < S; ++k) {
    const float t = d.times[k], dt = d.times[k + 1] - d.times[k], sigma = 1.0f - t;
    const float var = sigma * sigma + t * sigma;
    const std::vector<float> v = guided(x, k);
    noise(0, k + 1, w.data());
    for (int32_t i = 0; i < D; ++i) {
      const float drift = v[i] + sigma * ((t * v[i] - x[i]) / var);
      x[i] = (x[i] + drift * dt) + std::sqrt(2.0f * sigma) * (w[i] * std::sqrt(dt));
    }
  }
  const std::vector<float> v = guided(x, S - 1);
  for (int32_t i = 0; i < D; ++i) x[i] += v[i] * d.last_step_size;
  std::vector<float> token(D);
  if (d.normalize) {
    layer_norm(x.data(), D, {}, {}, token.data());
  } else {
    token = x;
  }
  return token;
}

TEST_F(FlowHeadTest, TheDeviceDescriptionAloneSamplesTheHeadsTokens) {
  FlowSampling s;  // the family's: 50 steps
  const model::FlowMatchingHeadDesc d = head_->Describe(s);
  ASSERT_EQ(d.times.size(), 50u);
  ASSERT_EQ(d.blocks.size(), static_cast<size_t>(dims_.blocks));
  EXPECT_EQ(d.times.front(), 0.0f);
  // The table is TimestepEmbedder at the grid times.
  std::vector<float> temb(dims_.width);
  d.time_embedding(d.times[17], temb.data());
  EXPECT_TRUE(std::equal(temb.begin(), temb.end(), d.time_embeddings.begin() + 17 * dims_.width));
  std::vector<float> cond(dims_.cond_dim), uncond(dims_.cond_dim);
  for (size_t i = 0; i < cond.size(); ++i) {
    cond[i] = std::sin(0.7f * i + 0.2f);
    uncond[i] = std::cos(0.4f * i);
  }
  for (float cfg : {7.5f, 1.0f}) {
    s.cfg = cfg;
    const NoiseFn noise = KeyedNoise(21, {3}, 5, dims_.token_dim);
    std::vector<float> want(dims_.token_dim);
    ASSERT_TRUE(head_->Sample(cond.data(), uncond.data(), 1, s, noise, want.data()).ok());
    const std::vector<float> got = SampleFromDescription(d, cond.data(), uncond.data(), cfg, noise);
    // f32 (cblas) against double accumulation through 50 steps.
    EXPECT_LT(RelativeError(got.data(), want), 1e-4) << "cfg " << cfg;
  }
}

}  // namespace
}  // namespace argen::nextstep
