// The CPU flow-matching head against the official FlowMatchingHead
// (tests/goldens/tiny/tiny-nextstep, tools/goldens/make_nextstep_goldens.py):
// the velocity net, and a whole sampled token with the official sampler's
// recorded noise injected.
#include "engine/families/nextstep/flow_head.h"

#include <cmath>
#include <set>

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

}  // namespace
}  // namespace argen::nextstep
