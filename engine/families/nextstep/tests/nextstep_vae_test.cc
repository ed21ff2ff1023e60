// NextStep-1's VAE decoding against the official code on the tiny VAE
// (tests/goldens/tiny/tiny-nextstep/vae: modeling_flux_vae.AutoencoderKL,
// decoding NextStep.unpatchify(tokens) / scaling_factor + shift_factor, then
// the pipeline's to_pil).
#include "engine/families/nextstep/nextstep_vae.h"

#include <cstdlib>
#include <fstream>
#include <iterator>

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

class NextStepVaeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    golden_ = ReadJson(std::string(kRel) + "/goldens.json")["vae"];
    absl::StatusOr<NextStepConfig> c = LoadNextStepConfig(Dir());
    ASSERT_TRUE(c.ok()) << c.status();
    absl::StatusOr<NextStepVaeConfig> vae = LoadNextStepVaeConfig(NextStepVaeDir(Dir(), *c));
    ASSERT_TRUE(vae.ok()) << vae.status();
    absl::StatusOr<std::unique_ptr<NextStepVaeDecoder>> d =
        NextStepVaeDecoder::Create(NextStepVaeDir(Dir(), *c), *vae, c->latent_patch_size, /*max_grid=*/4, 1);
    ASSERT_TRUE(d.ok()) << d.status();
    decoder_ = *std::move(d);
    grid_.grid_h = grid_.grid_w = golden_["grid"];
    grid_.tokens = ReadF32(Dir() + "/" + golden_["tokens"].get<std::string>());
  }
  nlohmann::json golden_;
  std::unique_ptr<NextStepVaeDecoder> decoder_;
  TokenGrid grid_;
};

TEST_F(NextStepVaeTest, PixelsMatchTheOfficialDecoder) {
  const std::vector<float> want = ReadF32(Dir() + "/" + golden_["pixels"].get<std::string>());
  std::vector<float> chw;
  ASSERT_TRUE(decoder_->DecodeToFloat(grid_, &chw).ok());
  ASSERT_EQ(chw.size(), want.size());
  EXPECT_LT(RelativeError(chw.data(), want), 1e-5);
}

TEST_F(NextStepVaeTest, RgbIsThePipelinesRoundedConversion) {
  std::ifstream in(Dir() + "/" + golden_["rgb8"].get<std::string>(), std::ios::binary);
  const std::string want((std::istreambuf_iterator<char>(in)), {});
  absl::StatusOr<std::vector<engine::RgbImage>> images = decoder_->Decode({grid_, grid_});
  ASSERT_TRUE(images.ok()) << images.status();
  ASSERT_EQ(images->size(), 2u);
  const engine::RgbImage& image = (*images)[0];
  EXPECT_EQ(image.height, golden_["height"].get<int32_t>());
  EXPECT_EQ(image.width, golden_["width"].get<int32_t>());
  ASSERT_EQ(image.rgb.size(), want.size());
  int32_t off_by_one = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const int diff = std::abs(int{image.rgb[i]} - int{static_cast<uint8_t>(want[i])});
    ASSERT_LE(diff, 1) << "byte " << i;  // float rounding may move a value across a .5 boundary
    off_by_one += diff;
  }
  EXPECT_LE(off_by_one, static_cast<int32_t>(want.size() / 100)) << "bytes off by one";
  EXPECT_EQ((*images)[1].rgb, image.rgb);
}

TEST_F(NextStepVaeTest, WrongTokenCountIsRefusedNamingTheGrid) {
  TokenGrid short_grid = grid_;
  short_grid.tokens.pop_back();
  absl::StatusOr<std::vector<engine::RgbImage>> images = decoder_->Decode({grid_, short_grid});
  ASSERT_FALSE(images.ok());
  EXPECT_EQ(images.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(images.status().message().find("token_grids[1]"), std::string::npos) << images.status();
  TokenGrid too_big;
  too_big.grid_h = too_big.grid_w = 5;  // over max_grid 4
  too_big.tokens.assign(25 * decoder_->token_dim(), 0.0f);
  EXPECT_EQ(decoder_->Decode({too_big}).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(NextStepVaeLoadTest, MissingCheckpointIsNamed) {
  absl::StatusOr<std::unique_ptr<NextStepVaeDecoder>> d =
      NextStepVaeDecoder::Create(Dir() + "/no-such-vae", NextStepVaeConfig{}, 2, 4, 1);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.status().message().find("checkpoint.pt"), std::string::npos) << d.status();
}

}  // namespace
}  // namespace argen::nextstep
