// The per-token sampling and the image decoding of NextStep-1 against one
// official NextStepPipeline.generate_image run on the tiny checkpoint
// (tests/goldens/tiny/tiny-nextstep, "generate": its hidden states, randn
// draws, tokens and image recorded as it ran).
#include <fstream>
#include <iterator>

#include "engine/checkpoint/checkpoint.h"
#include "engine/families/nextstep/nextstep_vae.h"
#include "engine/families/nextstep/token_sampler.h"
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
std::string File(const nlohmann::json& g, const char* key) { return Dir() + "/" + g[key].get<std::string>(); }

class NextStepGenerationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    golden_ = ReadJson(std::string(kRel) + "/goldens.json")["generate"];
    absl::StatusOr<NextStepConfig> c = LoadNextStepConfig(Dir());
    ASSERT_TRUE(c.ok()) << c.status();
    config_ = *c;
    grid_ = golden_["grid"];
    tokens_ = ReadF32(File(golden_, "tokens"));
    ASSERT_EQ(tokens_.size(), static_cast<size_t>(grid_) * grid_ * config_.token_dim());
  }
  nlohmann::json golden_;
  NextStepConfig config_;
  int32_t grid_ = 0;
  std::vector<float> tokens_;
};

// Every token of the run from its recorded hidden states and noise: image_out_projector,
// the head's sampler with CFG, use_norm.
TEST_F(NextStepGenerationTest, EveryTokenIsThePipelinesFromItsHiddenStatesAndNoise) {
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::Checkpoint::Open(Dir());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  absl::StatusOr<std::unique_ptr<NextStepTokenSampler>> sampler = NextStepTokenSampler::Load(**ckpt, config_);
  ASSERT_TRUE(sampler.ok()) << sampler.status();
  const std::vector<float> hidden = ReadF32(File(golden_, "hidden"));  // [token][cond, uncond][H]
  const std::vector<float> noise = ReadF32(File(golden_, "noise"));    // [token * steps + draw][D]
  FlowSampling s;
  s.steps = golden_["steps"];
  s.cfg = golden_["cfg"];
  s.timesteps_shift = golden_["timesteps_shift"];
  const int32_t H = config_.hidden_size, D = config_.token_dim(), L = grid_ * grid_;
  ASSERT_EQ(hidden.size(), static_cast<size_t>(L) * 2 * H);
  ASSERT_EQ(noise.size(), static_cast<size_t>(L) * s.steps * D);
  for (int32_t t = 0; t < L; ++t) {
    const NoiseFn recorded = [&](int32_t, int32_t draw, float* out) {
      const float* src = noise.data() + (static_cast<size_t>(t) * s.steps + draw) * D;
      std::copy(src, src + D, out);
    };
    std::vector<float> token(D);
    const float* h = hidden.data() + static_cast<size_t>(t) * 2 * H;
    ASSERT_TRUE((*sampler)->Sample(h, h + H, 1, s, recorded, token.data()).ok());
    EXPECT_LT(RelativeError(token.data(), tokens_.data() + static_cast<size_t>(t) * D, D), 1e-4) << "token " << t;
  }
}

TEST_F(NextStepGenerationTest, ImageIsThePipelinesFromItsTokens) {
  absl::StatusOr<NextStepVaeConfig> vae = LoadNextStepVaeConfig(NextStepVaeDir(Dir(), config_));
  ASSERT_TRUE(vae.ok()) << vae.status();
  absl::StatusOr<std::unique_ptr<NextStepVaeDecoder>> decoder =
      NextStepVaeDecoder::Create(NextStepVaeDir(Dir(), config_), *vae, config_.latent_patch_size, grid_, 1);
  ASSERT_TRUE(decoder.ok()) << decoder.status();
  const TokenGrid grid{grid_, grid_, tokens_};
  std::vector<float> chw;
  ASSERT_TRUE((*decoder)->DecodeToFloat(grid, &chw).ok());
  EXPECT_LT(RelativeError(chw.data(), ReadF32(File(golden_, "pixels"))), 1e-5);
  absl::StatusOr<std::vector<engine::RgbImage>> images = (*decoder)->Decode({grid});
  ASSERT_TRUE(images.ok()) << images.status();
  std::ifstream in(File(golden_, "rgb8"), std::ios::binary);
  const std::string want((std::istreambuf_iterator<char>(in)), {});
  ASSERT_EQ((*images)[0].rgb.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_LE(std::abs(int{(*images)[0].rgb[i]} - int{static_cast<uint8_t>(want[i])}), 1) << "byte " << i;
  }
}

}  // namespace
}  // namespace argen::nextstep
