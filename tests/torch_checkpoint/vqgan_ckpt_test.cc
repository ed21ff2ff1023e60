// Meta's Chameleon VQGAN ships as a Lightning vqgan.ckpt (a torch.save dict
// whose "state_dict" holds the weights next to epoch, global_step, optimizer
// states, ...). Read through OpenCheckpointFile and the VQGAN loader's
// TensorSource, it decodes to the same pixels as the safetensors form of the
// same weights (the tiny VQGAN goldens), with the other entries skipped.
#include <random>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/tests/test_files.h"
#include "engine/checkpoint/tests/torch_writer.h"
#include "engine/checkpoint/weights_file.h"
#include "engine/vqgan/vqgan_config.h"
#include "engine/vqgan/vqgan_decoder.h"
#include "engine/vqgan/vqgan_weights.h"
#include "gtest/gtest.h"

namespace argen {
namespace {

std::string GoldenDir(const std::string& variant) {
  return checkpoint::testing::SourceDir() + "/tests/goldens/vqgan/" + variant;
}

std::unique_ptr<vqgan::VqganDecoder> Decoder(const checkpoint::Checkpoint& ckpt, const vqgan::VqganConfig& config) {
  auto weights = vqgan::LoadVqganDecoderWeights(vqgan::CheckpointTensorSource(ckpt), config);
  EXPECT_TRUE(weights.ok()) << weights.status();
  if (!weights.ok()) return nullptr;
  auto decoder = vqgan::VqganDecoder::Create(std::move(*weights), config, vqgan::DecodeLimits{64, 8}, 1);
  EXPECT_TRUE(decoder.ok()) << decoder.status();
  return decoder.ok() ? std::move(*decoder) : nullptr;
}

class LightningVqgan : public ::testing::TestWithParam<std::string> {};

TEST_P(LightningVqgan, DecodesLikeTheSafetensorsForm) {
  const std::string dir = GoldenDir(GetParam());
  auto config = vqgan::LoadVqganYaml(dir + "/vqgan.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  auto safetensors = checkpoint::Checkpoint::Open(dir);
  ASSERT_TRUE(safetensors.ok()) << safetensors.status();

  checkpoint::testing::ScratchDir scratch;
  const std::string ckpt_path = scratch.File("vqgan.ckpt");
  checkpoint::testing::WriteBytes(
      ckpt_path, checkpoint::testing::TorchSaveBytes(checkpoint::testing::ReadAll(dir + "/model.safetensors"), "vqgan",
                                                     /*lightning=*/true));
  auto weights_file = checkpoint::OpenWeightsFile(ckpt_path);
  ASSERT_TRUE(weights_file.ok()) << weights_file.status();
  EXPECT_FALSE((*weights_file)->Skipped().empty());  // epoch, pytorch-lightning_version
  auto lightning = checkpoint::OpenCheckpointFile(ckpt_path);
  ASSERT_TRUE(lightning.ok()) << lightning.status();

  auto from_safetensors = Decoder(**safetensors, *config);
  auto from_ckpt = Decoder(**lightning, *config);
  ASSERT_NE(from_safetensors, nullptr);
  ASSERT_NE(from_ckpt, nullptr);
  std::mt19937 rng(5);
  for (const auto& [h, w] : std::vector<std::pair<int32_t, int32_t>>{{2, 3}, {4, 4}}) {
    vqgan::CodeGrid grid{h, w, {}};
    for (int32_t i = 0; i < h * w; ++i) grid.codes.push_back(static_cast<int32_t>(rng() % config->n_embed));
    std::vector<float> a, b;
    ASSERT_TRUE(from_safetensors->DecodeToFloat(grid, &a).ok());
    ASSERT_TRUE(from_ckpt->DecodeToFloat(grid, &b).ok());
    ASSERT_FALSE(a.empty());
    EXPECT_EQ(a, b) << h << " x " << w;
  }
}

INSTANTIATE_TEST_SUITE_P(Goldens, LightningVqgan, ::testing::Values("chameleon-tiny", "chameleon-tiny-attn"),
                         [](const auto& info) { return info.param == "chameleon-tiny" ? "Plain" : "Attn"; });

}  // namespace
}  // namespace argen
