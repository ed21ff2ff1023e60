// The Chameleon VQGAN re-labelled as VQ-16 (lumina_vq16.h) decodes what
// engine/vqgan's decoder decodes (itself checked against the PyTorch
// restatement of Meta's): the CPU VQ-16 decoder on the re-labelled weights of
// the shipped small model's VQGAN against the VQGAN decoder, random codes,
// relative error 1e-5. This is what lets the GPU VQ-16 decoder serve Lumina.
#include <random>

#include "engine/checkpoint/weights_file.h"
#include "engine/families/lumina/lumina_vq16.h"
#include "engine/families/lumina/tests/test_util.h"
#include "engine/vq/vq_decoder.h"
#include "engine/vqgan/vqgan_decoder.h"
#include "gtest/gtest.h"

namespace argen::lumina {
namespace {

using testing::RelativeError;
using testing::SourceDir;

TEST(LuminaVq16Test, RelabelledWeightsDecodeAsTheVqganDecoder) {
  const std::string dir = SourceDir() + "/models/argen-lumina-scenes-v1/tokenizer";
  absl::StatusOr<vqgan::VqganConfig> config = vqgan::LoadVqganYaml(dir + "/vqgan.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::OpenCheckpointFile(dir + "/vqgan.ckpt");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  absl::StatusOr<vqgan::VqganDecoderWeights> weights =
      vqgan::LoadVqganDecoderWeights(vqgan::CheckpointTensorSource(**ckpt), *config);
  ASSERT_TRUE(weights.ok()) << weights.status();
  constexpr int32_t kGrid = 24;
  absl::StatusOr<std::pair<vq::VqDecoderWeights, vq::Vq16Config>> vq16 = AsVq16(*weights, *config, kGrid);
  ASSERT_TRUE(vq16.ok()) << vq16.status();
  EXPECT_EQ(vq16->second.image_size, 384);
  EXPECT_FALSE(vq16->second.codebook_l2_norm);
  absl::StatusOr<std::unique_ptr<vq::VqDecoder>> as_vq16 = vq::VqDecoder::Create(vq16->first, vq16->second, 2);
  ASSERT_TRUE(as_vq16.ok()) << as_vq16.status();
  absl::StatusOr<std::unique_ptr<vqgan::VqganDecoder>> reference =
      vqgan::VqganDecoder::Create(*std::move(weights), *config, {kGrid * kGrid, kGrid}, 2);
  ASSERT_TRUE(reference.ok()) << reference.status();

  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> code(0, config->n_embed - 1);
  vqgan::CodeGrid grid{kGrid, kGrid, std::vector<int32_t>(kGrid * kGrid)};
  for (int32_t& c : grid.codes) c = code(rng);
  std::vector<float> want, got;
  ASSERT_TRUE((*reference)->DecodeToFloat(grid, &want).ok());
  ASSERT_TRUE((*as_vq16)->DecodeToFloat(grid.codes, &got).ok());
  ASSERT_EQ(got.size(), want.size());
  EXPECT_LE(RelativeError(got.data(), want), 1e-5);
  // And the bytes of the images agree (the same pixel conversion).
  absl::StatusOr<std::vector<engine::RgbImage>> a = (*reference)->Decode({grid});
  absl::StatusOr<std::vector<engine::RgbImage>> b = (*as_vq16)->Decode({grid.codes});
  ASSERT_TRUE(a.ok() && b.ok());
  int differ = 0;
  for (size_t i = 0; i < (*a)[0].rgb.size(); ++i) differ += std::abs((*a)[0].rgb[i] - (*b)[0].rgb[i]) > 1 ? 1 : 0;
  EXPECT_EQ(differ, 0);
}

TEST(LuminaVq16Test, NetworksWithoutAVq16FormAreRefused) {
  vqgan::VqganDecoderWeights w;  // no middle attention
  vqgan::VqganConfig c;
  c.attention = false;
  absl::StatusOr<std::pair<vq::VqDecoderWeights, vq::Vq16Config>> r = AsVq16(w, c, 24);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("attn_type none"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace argen::lumina
