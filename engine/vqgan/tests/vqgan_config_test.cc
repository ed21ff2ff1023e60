// vqgan.yaml parsing: the published Chameleon configuration and its errors.
#include "engine/vqgan/vqgan_config.h"

#include <string>

#include "gtest/gtest.h"

namespace argen::vqgan {
namespace {

// The fields of Chameleon's tokenizer/vqgan.yaml (docs/lumina-mgpt.md).
constexpr char kPublished[] = R"(model:
  base_learning_rate: 4.5e-06
  target: taming.models.vqgan.VQModel
  params:
    embed_dim: 256
    n_embed: 8192
    ddconfig:
      double_z: false
      z_channels: 256
      resolution: 512
      in_channels: 3
      out_ch: 3
      ch: 128
      ch_mult: [1, 1, 2, 2, 4]
      num_res_blocks: 2
      attn_resolutions: []
      dropout: 0.0
    lossconfig:
      target: taming.modules.losses.vqperceptual.VQLPIPSWithDiscriminator
      params: {disc_start: 0}
)";

std::string Edit(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

TEST(VqganConfigTest, PublishedConfiguration) {
  auto c = ParseVqganYaml(kPublished, "vqgan.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->embed_dim, 256);
  EXPECT_EQ(c->n_embed, 8192);
  EXPECT_EQ(c->z_channels, 256);
  EXPECT_EQ(c->ch, 128);
  EXPECT_EQ(c->ch_mult, (std::vector<int32_t>{1, 1, 2, 2, 4}));
  EXPECT_EQ(c->num_res_blocks, 2);
  EXPECT_TRUE(c->attn_resolutions.empty());
  EXPECT_EQ(c->resolution, 512);
  EXPECT_EQ(c->downsample(), 16);
  EXPECT_EQ(c->width(4), 512);
  EXPECT_TRUE(c->attention);
  EXPECT_FALSE(c->tanh_out);
  EXPECT_TRUE(c->resamp_with_conv);
  for (int32_t level = 0; level < 5; ++level) EXPECT_FALSE(c->LevelHasAttention(level));
}

TEST(VqganConfigTest, AttentionLevelsFollowTheNominalResolution) {
  auto c = ParseVqganYaml(Edit(kPublished, "attn_resolutions: []", "attn_resolutions: [32, 64]"), "vqgan.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->LevelHasAttention(0));  // 512
  EXPECT_TRUE(c->LevelHasAttention(3));   // 64
  EXPECT_TRUE(c->LevelHasAttention(4));   // 32
  auto none = ParseVqganYaml(Edit(kPublished, "dropout: 0.0", "dropout: 0.0\n      attn_type: none"), "vqgan.yaml");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->attention);
}

TEST(VqganConfigTest, ErrorsNameTheField) {
  const auto expect_error = [](const std::string& text, const std::string& needle) {
    auto c = ParseVqganYaml(text, "dir/vqgan.yaml");
    ASSERT_FALSE(c.ok()) << needle;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(c.status().message().find(needle), std::string::npos) << c.status();
    EXPECT_NE(c.status().message().find("dir/vqgan.yaml"), std::string::npos) << c.status();
  };
  expect_error("model: [", "not valid YAML");
  expect_error("model:\n  target: x\n", "model.params: missing");
  expect_error(Edit(kPublished, "    n_embed: 8192\n", ""), "model.params.n_embed: missing");
  expect_error(Edit(kPublished, "ch: 128", "ch: 16"), "model.params.ddconfig.ch_mult");
  expect_error(Edit(kPublished, "ch: 128", "ch: many"), "model.params.ddconfig.ch: has the wrong type");
  expect_error(Edit(kPublished, "out_ch: 3", "out_ch: 4"), "out_ch: must be 3");
  expect_error(Edit(kPublished, "resolution: 512", "resolution: 500"), "resolution: must be a positive multiple of");
  expect_error(Edit(kPublished, "dropout: 0.0", "dropout: 0.0\n      attn_type: linear"), "attn_type");
  expect_error(Edit(kPublished, "dropout: 0.0", "dropout: 0.0\n      give_pre_end: true"), "give_pre_end");
  expect_error(Edit(kPublished, "ch_mult: [1, 1, 2, 2, 4]", "ch_mult: []"), "ch_mult: must have 1..8 entries");
}

TEST(VqganConfigTest, MissingFileIsNotFound) {
  auto c = LoadVqganYaml("/nonexistent/vqgan.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(c.status().message().find("/nonexistent/vqgan.yaml"), std::string::npos);
}

}  // namespace
}  // namespace argen::vqgan
