// Emu3's vision decoder on the CPU against transformers' Emu3VQVAE.decode
// (frame 0 of the decoded video; tests/goldens/tiny/emu3-goldens, made by
// tools/goldens/make_emu3_goldens.py) on a 3 x 5 grid of the tiny random
// vision tokenizer, from both namings: transformers' (vqmodel.* inside
// tiny-emu3-gen-hf) and BAAI's (tiny-emu3-gen/vision_tokenizer); and against
// BAAI's own Emu3VisionVQModel.decode on the same grid (baai_pixels.f32,
// tools/goldens/make_emu3_baai_goldens.py). fp32;
// relative error 1e-4. A tensor of the wrong shape is refused by name.
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/emu3vq/emu3vq_config.h"
#include "engine/emu3vq/emu3vq_decoder.h"
#include "engine/emu3vq/emu3vq_weights.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/golden_files.h"

namespace argen::emu3vq {
namespace {

using test_support::ReadF32;
using test_support::ReadJson;
using test_support::RelativeError;
using test_support::SourceDir;

constexpr double kTolerance = 1e-4;

nlohmann::json ConfigOf(const std::string& relative) { return ReadJson(relative + "/config.json"); }

struct Loaded {
  Emu3VqConfig config;
  std::unique_ptr<checkpoint::Checkpoint> checkpoint;
  Emu3VqNaming naming;
  std::string prefix;
};

Loaded LoadNaming(Emu3VqNaming naming) {
  Loaded l;
  l.naming = naming;
  std::string dir;
  if (naming == Emu3VqNaming::kBaai) {
    const std::string rel = "tests/goldens/tiny/tiny-emu3-gen/vision_tokenizer";
    l.config = *ParseBaaiVqConfig(ConfigOf(rel), rel);
    dir = SourceDir() + "/" + rel;
  } else {
    const std::string rel = "tests/goldens/tiny/tiny-emu3-gen-hf";
    absl::StatusOr<Emu3VqConfig> c = ParseHfVqConfig(ConfigOf(rel)["vq_config"], rel);
    EXPECT_TRUE(c.ok()) << c.status();
    l.config = *c;
    l.prefix = "vqmodel.";
    dir = SourceDir() + "/" + rel;
  }
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::Checkpoint::Open(dir);
  EXPECT_TRUE(ckpt.ok()) << ckpt.status();
  l.checkpoint = std::move(*ckpt);
  return l;
}

class Emu3VqDecoderTest : public ::testing::TestWithParam<Emu3VqNaming> {};

TEST_P(Emu3VqDecoderTest, FrameZeroMatchesTransformers) {
  const nlohmann::json golden = ReadJson("tests/goldens/tiny/emu3-goldens/goldens.json");
  Loaded l = LoadNaming(GetParam());
  EXPECT_EQ(l.config.spatial_factor(), 8);
  absl::StatusOr<Emu3VqWeights> w =
      LoadEmu3VqWeights(CheckpointTensorSource(*l.checkpoint), l.config, l.naming, l.prefix);
  ASSERT_TRUE(w.ok()) << w.status();
  absl::StatusOr<std::unique_ptr<Emu3VqDecoder>> d = Emu3VqDecoder::Create(*std::move(w), l.config, 64, 1);
  ASSERT_TRUE(d.ok()) << d.status();
  const nlohmann::json& px = golden["pixels"];
  CodeGrid grid{px["height"].get<int32_t>(), px["width"].get<int32_t>(), px["codes"].get<std::vector<int32_t>>()};
  std::vector<float> out;
  ASSERT_TRUE((*d)->DecodeToFloat(grid, &out).ok());
  const std::vector<float> expected =
      ReadF32(SourceDir() + "/tests/goldens/tiny/emu3-goldens/" + px["file"].get<std::string>());
  ASSERT_EQ(out.size(), expected.size());
  ASSERT_EQ(out.size(), 3u * 24 * 40);
  EXPECT_LE(RelativeError(out.data(), expected), kTolerance);
  const nlohmann::json baai = ReadJson("tests/goldens/tiny/emu3-goldens/baai_goldens.json");
  const std::vector<float> baai_pixels =
      ReadF32(SourceDir() + "/tests/goldens/tiny/emu3-goldens/" + baai["pixels_file"].get<std::string>());
  ASSERT_EQ(baai_pixels.size(), out.size());
  EXPECT_LE(RelativeError(out.data(), baai_pixels), kTolerance) << "against BAAI's Emu3VisionVQModel";

  // The RGB8 image: 8 px a code, the pixel conversion of the same floats.
  absl::StatusOr<std::vector<engine::RgbImage>> images = (*d)->Decode({grid, grid});
  ASSERT_TRUE(images.ok()) << images.status();
  ASSERT_EQ(images->size(), 2u);
  EXPECT_EQ((*images)[0].width, 40);
  EXPECT_EQ((*images)[0].height, 24);
  EXPECT_EQ((*images)[0].rgb, (*images)[1].rgb);

  CodeGrid bad = grid;
  bad.codes[3] = l.config.codebook_size;
  absl::StatusOr<std::vector<engine::RgbImage>> refused = (*d)->Decode({grid, bad});
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("grids[1][3]"), std::string::npos) << refused.status();
}

INSTANTIATE_TEST_SUITE_P(Namings, Emu3VqDecoderTest,
                         ::testing::Values(Emu3VqNaming::kTransformers, Emu3VqNaming::kBaai),
                         [](const ::testing::TestParamInfo<Emu3VqNaming>& p) {
                           return p.param == Emu3VqNaming::kBaai ? std::string("Baai") : std::string("Transformers");
                         });

TEST(Emu3VqWeightsTest, AMismatchedConfigIsRefusedNamingTheTensor) {
  Loaded l = LoadNaming(Emu3VqNaming::kBaai);
  Emu3VqConfig wider = l.config;
  wider.ch = 64;  // the file's convs are 32 channels wide
  absl::StatusOr<Emu3VqWeights> w = LoadEmu3VqWeights(CheckpointTensorSource(*l.checkpoint), wider, l.naming, "");
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find("decoder.conv_in.weight"), std::string::npos) << w.status();
  // The other naming's tensors are not in BAAI's file: the first one is named.
  absl::StatusOr<Emu3VqWeights> hf =
      LoadEmu3VqWeights(CheckpointTensorSource(*l.checkpoint), l.config, Emu3VqNaming::kTransformers, "vqmodel.");
  ASSERT_FALSE(hf.ok());
  EXPECT_NE(hf.status().message().find("vqmodel.quantize.embedding.weight"), std::string::npos) << hf.status();
}

TEST(Emu3VqConfigTest, ConfigsTheDecoderCannotRunAreRefusedNamingTheField) {
  nlohmann::json hf = ConfigOf("tests/goldens/tiny/tiny-emu3-gen-hf")["vq_config"];
  hf["hidden_size"] = 48;
  absl::StatusOr<Emu3VqConfig> c = ParseHfVqConfig(hf, "vq_config");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("hidden_size 48"), std::string::npos) << c.status();
  hf["hidden_size"] = 64;
  hf["num_attention_heads"] = 2;
  c = ParseHfVqConfig(hf, "vq_config");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("num_attention_heads"), std::string::npos) << c.status();
  nlohmann::json baai = ConfigOf("tests/goldens/tiny/tiny-emu3-gen/vision_tokenizer");
  baai["embed_dim"] = 8;
  c = ParseBaaiVqConfig(baai, "config.json");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("embed_dim 8"), std::string::npos) << c.status();
}

}  // namespace
}  // namespace argen::emu3vq
