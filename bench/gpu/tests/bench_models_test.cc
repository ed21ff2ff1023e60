// The benchmark models' shapes (janus_shapes.h, nextstep_shapes.h) on the CPU:
// NextStep-1-14B is the published config through the family's reader and
// spec builder, with the family's grid and N_r; its random flow head has the
// published head's size and draws finite, normalized tokens through the
// family's CPU sampler (the device head runs the same description); its
// random VAE has the published decoder's layout; an unknown model name lists
// the models.
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "bench/gpu/janus_shapes.h"
#include "bench/gpu/nextstep_shapes.h"
#include "engine/families/nextstep/flow_head.h"
#include "engine/families/nextstep/nextstep_spec.h"
#include "gtest/gtest.h"

namespace argen::bench {
namespace {

TEST(BenchModelsTest, NextStepIsThePublishedConfigThroughTheFamilysSpec) {
  absl::StatusOr<nextstep::NextStepConfig> c = PublishedNextStepConfig();
  ASSERT_TRUE(c.ok()) << c.status();
  // Issue #31 and the hub's config.json: Qwen2.5-14B's decoder, 64-float tokens, a 1536 x 12 head.
  EXPECT_EQ(c->hidden_size, 5120);
  EXPECT_EQ(c->num_hidden_layers, 48);
  EXPECT_EQ(c->num_attention_heads, 40);
  EXPECT_EQ(c->num_key_value_heads, 8);
  EXPECT_EQ(c->head_dim, 128);
  EXPECT_EQ(c->intermediate_size, 13824);
  EXPECT_EQ(c->token_dim(), 64);
  EXPECT_EQ(c->latent_size, 32);
  EXPECT_EQ(c->fm_head_dim, 1536);
  EXPECT_EQ(c->fm_head_layers, 12);

  absl::StatusOr<BenchModel> m = BenchModelFor("nextstep-14b");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_TRUE(m->nextstep.has_value());
  absl::StatusOr<model::ModelSpec> family = nextstep::NextStepSpec(*c);
  ASSERT_TRUE(family.ok()) << family.status();
  const model::StackConfig& a = m->spec.stack;
  const model::StackConfig& b = family->stack;
  EXPECT_EQ(std::tie(a.num_layers, a.hidden_size, a.num_heads, a.num_kv_heads, a.head_dim, a.intermediate_size,
                     a.rope_theta, a.norm_eps),
            std::tie(b.num_layers, b.hidden_size, b.num_heads, b.num_kv_heads, b.head_dim, b.intermediate_size,
                     b.rope_theta, b.norm_eps));
  EXPECT_TRUE(m->spec.stack.qkv_bias);
  ASSERT_EQ(m->spec.layers.size(), 48u);
  EXPECT_TRUE(m->spec.layers[0].q.bias.present());
  EXPECT_FALSE(m->spec.layers[0].o.bias.present());
  EXPECT_EQ(m->spec.output.token_dim, 64);
  EXPECT_EQ(m->spec.vector_head_in(), 5120);
  EXPECT_EQ(m->spec.input.vector_in.weight.shape, (std::vector<int64_t>{5120, 64}));
  // 512 px: 32 x 32 tokens, raster order; N_r 2 2/3 rows of 32, rounded up (the family's).
  EXPECT_EQ(m->grid.width, 32);
  EXPECT_EQ(m->grid.row_break_tokens, 0);
  EXPECT_EQ(m->grid.l_dec, 1024);
  EXPECT_EQ(m->grid.default_n_recent, 86);
}

TEST(BenchModelsTest, AnUnknownModelListsNextStep) {
  absl::StatusOr<BenchModel> m = BenchModelFor("nextstep-7b");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("nextstep-14b"), std::string::npos) << m.status();
}

TEST(BenchModelsTest, ThePublishedHeadHasAbout157MParameters) {
  absl::StatusOr<nextstep::NextStepConfig> c = PublishedNextStepConfig();
  ASSERT_TRUE(c.ok());
  const nextstep::FlowHeadDims dims{c->token_dim(), c->hidden_size, c->fm_head_dim, c->fm_head_layers};
  int64_t params = 0;
  for (const model::TensorRef& t : nextstep::FlowHeadTensors("image_head.net.", dims)) params += t.used_elements();
  EXPECT_GT(params, 150'000'000);
  EXPECT_LT(params, 165'000'000);
}

// The published depth (12 blocks) and condition width, a narrower net (the
// scale rule is per fan-in, so the width does not change it): 50 steps at
// cfg 7.5 on conditions of the random decoder's scale give finite tokens,
// LayerNormed, different per pair and the same for the same seed.
TEST(BenchModelsTest, ARandomHeadDrawsFiniteTokens) {
  absl::StatusOr<nextstep::NextStepConfig> c = PublishedNextStepConfig();
  ASSERT_TRUE(c.ok());
  c->fm_head_dim = 128;
  absl::StatusOr<std::unique_ptr<RandomFlowHead>> head = RandomNextStepFlowHead(*c, 42);
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ((*head)->desc.blocks.size(), 12u);
  EXPECT_EQ((*head)->desc.times.size(), 50u);
  const int32_t pairs = 2, C = c->hidden_size, D = c->token_dim();
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.4f);
  std::vector<float> cond(pairs * C), uncond(pairs * C);
  for (float& x : cond) x = normal(rng);
  for (float& x : uncond) x = normal(rng);
  nextstep::FlowSampling sampling;
  sampling.cfg = 7.5f;
  std::vector<float> tokens(pairs * D);
  ASSERT_TRUE(
      (*head)
          ->head
          ->Sample(cond.data(), uncond.data(), pairs, sampling, nextstep::KeyedNoise(9, {0, 1}, 0, D), tokens.data())
          .ok());
  for (int32_t p = 0; p < pairs; ++p) {
    const float* t = tokens.data() + p * D;
    double mean = 0, sq = 0;
    for (int32_t i = 0; i < D; ++i) {
      ASSERT_TRUE(std::isfinite(t[i])) << "pair " << p << " value " << i;
      mean += t[i];
    }
    mean /= D;
    for (int32_t i = 0; i < D; ++i) sq += (t[i] - mean) * (t[i] - mean);
    EXPECT_NEAR(mean, 0.0, 1e-4);
    EXPECT_NEAR(sq / D, 1.0, 1e-3);
  }
  EXPECT_NE(tokens[0], tokens[D]);
  absl::StatusOr<std::unique_ptr<RandomFlowHead>> again = RandomNextStepFlowHead(*c, 42);
  ASSERT_TRUE(again.ok());
  std::vector<float> same(pairs * D);
  ASSERT_TRUE(
      (*again)
          ->head
          ->Sample(cond.data(), uncond.data(), pairs, sampling, nextstep::KeyedNoise(9, {0, 1}, 0, D), same.data())
          .ok());
  EXPECT_EQ(same, tokens);
}

TEST(BenchModelsTest, TheRandomVaeHasThePublishedDecoder) {
  absl::StatusOr<RandomVae> vae = RandomNextStepVae(7);
  ASSERT_TRUE(vae.ok()) << vae.status();
  EXPECT_FALSE(vae->config.quantized);
  EXPECT_EQ(vae->config.z_channels, 16);
  EXPECT_EQ(vae->config.ch, 128);
  EXPECT_EQ(vae->config.ch_mult, (std::vector<int32_t>{1, 2, 4, 4}));
  EXPECT_EQ(vae->config.downsample(), 8);
  EXPECT_TRUE(vae->weights.mid_attn_1.has_value());
  EXPECT_EQ(vae->weights.up.size(), 4u);
}

}  // namespace
}  // namespace argen::bench
