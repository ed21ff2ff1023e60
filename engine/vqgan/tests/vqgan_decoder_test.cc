// The CPU Chameleon VQGAN decoder against PyTorch goldens
// (tools/goldens/make_vqgan_goldens.py: tools/lumina_torch/vqgan.py, itself
// checked against Meta's chameleon/inference/vqgan.py) on two tiny random
// VQGANs of the architecture, square and non-square grids; plus its errors.
#include "engine/vqgan/vqgan_decoder.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/vqgan/vqgan_config.h"
#include "engine/vqgan/vqgan_weights.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace argen::vqgan {
namespace {

std::string GoldenDir(const std::string& variant) {
  const char* dir = std::getenv("ARGEN_SOURCE_DIR");
  return std::string(dir ? dir : ".") + "/tests/goldens/vqgan/" + variant;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct Golden {
  std::vector<CodeGrid> grids;
  int32_t downsample = 0;
  std::vector<std::vector<float>> pixels;  // per grid [3][H][W]
  std::vector<std::vector<uint8_t>> rgb8;  // per grid [H][W][3]
};

Golden LoadGolden(const std::string& variant) {
  const std::string dir = GoldenDir(variant);
  const nlohmann::json meta = nlohmann::json::parse(ReadFile(dir + "/golden.json"));
  Golden g;
  g.downsample = meta.at("downsample");
  const std::string px = ReadFile(dir + "/" + meta.at("pixels_file").get<std::string>());
  const std::string rgb = ReadFile(dir + "/" + meta.at("rgb8_file").get<std::string>());
  size_t px_at = 0, rgb_at = 0;
  double sum = 0;
  for (const nlohmann::json& j : meta.at("grids")) {
    CodeGrid grid;
    grid.height = j.at("height");
    grid.width = j.at("width");
    grid.codes = j.at("codes").get<std::vector<int32_t>>();
    const size_t n = 3 * static_cast<size_t>(grid.height) * g.downsample * grid.width * g.downsample;
    std::vector<float> p(n);
    if (px_at + n * sizeof(float) <= px.size()) std::memcpy(p.data(), px.data() + px_at, n * sizeof(float));
    px_at += n * sizeof(float);
    for (float x : p) sum += x;
    std::vector<uint8_t> r(n);
    if (rgb_at + n <= rgb.size()) std::memcpy(r.data(), rgb.data() + rgb_at, n);
    rgb_at += n;
    g.grids.push_back(std::move(grid));
    g.pixels.push_back(std::move(p));
    g.rgb8.push_back(std::move(r));
  }
  EXPECT_EQ(px_at, px.size()) << variant << ": pixel golden size";
  EXPECT_EQ(rgb_at, rgb.size()) << variant << ": rgb8 golden size";
  EXPECT_NEAR(sum, meta.at("pixels_sum").get<double>(), 1e-6 * (1 + std::abs(sum)));
  return g;
}

DecodeLimits LimitsFor(const Golden& g) {
  DecodeLimits limits{1, 1};
  for (const CodeGrid& grid : g.grids) {
    limits.max_cells = std::max(limits.max_cells, grid.height * grid.width);
    limits.max_side = std::max({limits.max_side, grid.height, grid.width});
  }
  return limits;
}

std::unique_ptr<VqganDecoder> OpenDecoder(const std::string& variant, DecodeLimits limits) {
  auto config = LoadVqganYaml(GoldenDir(variant) + "/vqgan.yaml");
  EXPECT_TRUE(config.ok()) << config.status();
  if (!config.ok()) return nullptr;
  auto ckpt = checkpoint::Checkpoint::Open(GoldenDir(variant));
  EXPECT_TRUE(ckpt.ok()) << ckpt.status();
  if (!ckpt.ok()) return nullptr;
  auto weights = LoadVqganDecoderWeights(CheckpointTensorSource(**ckpt), *config);
  EXPECT_TRUE(weights.ok()) << weights.status();
  if (!weights.ok()) return nullptr;
  auto decoder = VqganDecoder::Create(std::move(*weights), *config, limits, /*threads=*/2);
  EXPECT_TRUE(decoder.ok()) << decoder.status();
  return decoder.ok() ? std::move(*decoder) : nullptr;
}

class VqganGoldenTest : public ::testing::TestWithParam<std::string> {};

// Float output within 1e-5 of PyTorch, relative to the output's largest magnitude.
TEST_P(VqganGoldenTest, FloatPixelsMatchPyTorch) {
  const Golden g = LoadGolden(GetParam());
  auto decoder = OpenDecoder(GetParam(), LimitsFor(g));
  ASSERT_NE(decoder, nullptr);
  for (size_t i = 0; i < g.grids.size(); ++i) {
    SCOPED_TRACE("grid " + std::to_string(i) + ": " + std::to_string(g.grids[i].height) + " x " +
                 std::to_string(g.grids[i].width));
    std::vector<float> chw;
    ASSERT_TRUE(decoder->DecodeToFloat(g.grids[i], &chw).ok());
    ASSERT_EQ(chw.size(), g.pixels[i].size());
    double max_err = 0, max_ref = 0;
    for (size_t k = 0; k < chw.size(); ++k) {
      max_err = std::max(max_err, std::abs(static_cast<double>(chw[k]) - g.pixels[i][k]));
      max_ref = std::max(max_ref, std::abs(static_cast<double>(g.pixels[i][k])));
    }
    EXPECT_LE(max_err, 1e-5 * std::max(1.0, max_ref)) << "max abs error " << max_err << ", max |ref| " << max_ref;
  }
}

// RGB8 through the batch entry point: the same bytes, except where the float
// output sits within float rounding of a uint8 step (then off by one).
TEST_P(VqganGoldenTest, Rgb8MatchesChameleonConversion) {
  const Golden g = LoadGolden(GetParam());
  auto decoder = OpenDecoder(GetParam(), LimitsFor(g));
  ASSERT_NE(decoder, nullptr);
  auto images = decoder->Decode(g.grids);
  ASSERT_TRUE(images.ok()) << images.status();
  ASSERT_EQ(images->size(), g.grids.size());
  for (size_t i = 0; i < g.grids.size(); ++i) {
    const engine::RgbImage& img = (*images)[i];
    EXPECT_EQ(img.height, g.grids[i].height * g.downsample);
    EXPECT_EQ(img.width, g.grids[i].width * g.downsample);
    ASSERT_EQ(img.rgb.size(), g.rgb8[i].size());
    const size_t hw = static_cast<size_t>(img.height) * img.width;
    for (size_t k = 0; k < img.rgb.size(); ++k) {
      if (img.rgb[k] == g.rgb8[i][k]) continue;
      const float ref = g.pixels[i][(k % 3) * hw + k / 3];
      const float scaled = (std::clamp(ref, -1.0f, 1.0f) + 1.0f) / 2.0f * 255.0f;
      EXPECT_LE(std::abs(int{img.rgb[k]} - int{g.rgb8[i][k]}), 1) << "byte " << k;
      EXPECT_LT(std::abs(scaled - std::round(scaled)), 1e-2) << "byte " << k << " not near a step";
    }
  }
}

TEST_P(VqganGoldenTest, TensorListMatchesTheCheckpoint) {
  auto config = LoadVqganYaml(GoldenDir(GetParam()) + "/vqgan.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  auto ckpt = checkpoint::Checkpoint::Open(GoldenDir(GetParam()));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  const auto tensors = VqganDecoderTensors(*config);
  ASSERT_GT(tensors.size(), 50u);
  for (const auto& [name, shape] : tensors) {
    auto info = (*ckpt)->Find(name);
    ASSERT_TRUE(info.ok()) << name;
    EXPECT_EQ((*info)->shape, shape) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, VqganGoldenTest, ::testing::Values("chameleon-tiny", "chameleon-tiny-attn"));

TEST(VqganDecoderTest, BadGridsAreRefusedBeforeDecoding) {
  const Golden g = LoadGolden("chameleon-tiny");
  auto decoder = OpenDecoder("chameleon-tiny", DecodeLimits{16, 5});
  ASSERT_NE(decoder, nullptr);
  const auto expect_error = [&](std::vector<CodeGrid> grids, const std::string& needle) {
    auto images = decoder->Decode(grids);
    ASSERT_FALSE(images.ok()) << needle;
    EXPECT_EQ(images.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(images.status().message().find(needle), std::string::npos) << images.status();
  };
  CodeGrid ok = g.grids[0];
  CodeGrid bad_code = ok;
  bad_code.codes[5] = 64;
  expect_error({ok, bad_code}, "grid 1: position 5: code 64 outside the codebook [0, 64)");
  bad_code.codes[5] = -1;
  expect_error({bad_code}, "code -1");
  CodeGrid short_grid = ok;
  short_grid.codes.pop_back();
  expect_error({short_grid}, "15 codes for a 4 x 4 grid");
  CodeGrid too_big{6, 3, std::vector<int32_t>(18, 0)};
  expect_error({too_big}, "larger than this decoder allows");
  CodeGrid empty{0, 4, {}};
  expect_error({empty}, "not positive");
  std::vector<float> chw;
  EXPECT_FALSE(decoder->DecodeToFloat(too_big, &chw).ok());
}

TEST(VqganDecoderTest, MissingOrMisshapenTensorsAreNamed) {
  auto config = LoadVqganYaml(GoldenDir("chameleon-tiny") + "/vqgan.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  auto ckpt = checkpoint::Checkpoint::Open(GoldenDir("chameleon-tiny"));
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  const TensorSource full = CheckpointTensorSource(**ckpt);
  const TensorSource without_upsample = [&](const std::string& name,
                                            const std::vector<int64_t>& shape) -> absl::StatusOr<std::vector<float>> {
    if (name == "decoder.up.2.upsample.conv.weight") return absl::NotFoundError("no tensor " + name);
    return full(name, shape);
  };
  auto missing = LoadVqganDecoderWeights(without_upsample, *config);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("decoder.up.2.upsample.conv.weight"), std::string::npos);
  VqganConfig wider = *config;
  wider.z_channels = 32;  // post_quant_conv is [16, 8, 1, 1] in the file
  auto misshapen = LoadVqganDecoderWeights(full, wider);
  ASSERT_FALSE(misshapen.ok());
  EXPECT_NE(misshapen.status().message().find("post_quant_conv.weight"), std::string::npos) << misshapen.status();
  // A prefix (e.g. a combined checkpoint) is prepended to every name.
  auto prefixed = LoadVqganDecoderWeights(full, *config, "vqgan.");
  ASSERT_FALSE(prefixed.ok());
  EXPECT_NE(prefixed.status().message().find("vqgan.quantize.embedding.weight"), std::string::npos);
}

TEST(VqganDecoderTest, CreateChecksWeightsLimitsAndScratch) {
  auto config = LoadVqganYaml(GoldenDir("chameleon-tiny") + "/vqgan.yaml");
  ASSERT_TRUE(config.ok());
  auto ckpt = checkpoint::Checkpoint::Open(GoldenDir("chameleon-tiny"));
  ASSERT_TRUE(ckpt.ok());
  auto weights = LoadVqganDecoderWeights(CheckpointTensorSource(**ckpt), *config);
  ASSERT_TRUE(weights.ok());
  EXPECT_FALSE(VqganDecoder::Create(*weights, *config, DecodeLimits{0, 4}).ok());
  EXPECT_FALSE(VqganDecoder::Create(*weights, *config, DecodeLimits{17, 4}).ok());  // more cells than side^2
  EXPECT_FALSE(VqganDecoder::Create(*weights, *config, DecodeLimits{16, 4}, -1).ok());
  auto huge = VqganDecoder::Create(*weights, *config, DecodeLimits{4000 * 4000, 4000});
  ASSERT_FALSE(huge.ok());
  EXPECT_EQ(huge.status().code(), absl::StatusCode::kResourceExhausted) << huge.status();
  VqganConfig other = *config;
  other.n_embed = 65;
  EXPECT_FALSE(VqganDecoder::Create(*weights, other, DecodeLimits{16, 4}).ok());
  auto decoder = VqganDecoder::Create(*weights, *config, DecodeLimits{16, 4}, 1);
  ASSERT_TRUE(decoder.ok()) << decoder.status();
  EXPECT_GT((*decoder)->scratch_bytes(), 0u);
}

}  // namespace
}  // namespace argen::vqgan
