// NextStep-1's config.json / VAE config parsing and its tensor map, against
// the tiny checkpoint in the published layout (tests/goldens/tiny/tiny-nextstep,
// written by the official NextStep class: tools/goldens/make_nextstep_goldens.py).
#include <string>

#include "engine/checkpoint/checkpoint.h"
#include "engine/families/nextstep/flow_head.h"
#include "engine/families/nextstep/nextstep_config.h"
#include "engine/families/nextstep/nextstep_spec.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/golden_files.h"

namespace argen::nextstep {
namespace {

using test_support::ReadJson;
using test_support::SourceDir;

const char kRel[] = "tests/goldens/tiny/tiny-nextstep";
std::string Dir() { return SourceDir() + "/" + kRel; }

TEST(NextStepConfigTest, ReadsTheTinyCheckpointsConfig) {
  absl::StatusOr<NextStepConfig> c = LoadNextStepConfig(Dir());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->hidden_size, 64);
  EXPECT_EQ(c->num_hidden_layers, 2);
  EXPECT_EQ(c->num_attention_heads, 4);
  EXPECT_EQ(c->num_key_value_heads, 2);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_EQ(c->vocab_size, 320);
  EXPECT_EQ(c->boi, 316);
  EXPECT_EQ(c->eoi, 317);
  EXPECT_EQ(c->image_placeholder_id, 318);
  EXPECT_EQ(c->token_dim(), 16);  // 4 channels, patch 2
  EXPECT_EQ(c->fm_head_dim, 32);
  EXPECT_EQ(c->fm_head_layers, 2);
  EXPECT_EQ(NextStepVaeDir(Dir(), *c), Dir() + "/vae");
  absl::StatusOr<NextStepVaeConfig> vae = LoadNextStepVaeConfig(NextStepVaeDir(Dir(), *c));
  ASSERT_TRUE(vae.ok()) << vae.status();
  EXPECT_EQ(vae->ch, 32);
  EXPECT_EQ(vae->ch_mult, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(vae->z_channels, 4);
  EXPECT_FLOAT_EQ(vae->scaling_factor, 0.75);
  EXPECT_FLOAT_EQ(vae->shift_factor, 0.125);
}

// The tiny config with one field replaced (null: removed).
std::string TinyConfigWith(const std::string& key, const nlohmann::json& value) {
  nlohmann::json j = ReadJson(std::string(kRel) + "/config.json");
  if (value.is_null()) {
    j.erase(key);
  } else {
    j[key] = value;
  }
  return j.dump();
}

TEST(NextStepConfigTest, RefusesWhatTheStackDoesNotRunNamingTheField) {
  struct Case {
    std::string key;
    nlohmann::json value;
  };
  for (const Case& c :
       {Case{"attention_bias", false}, Case{"o_attention_bias", true},
        Case{"rope_scaling", {{"rope_type", "linear"}, {"factor", 2.0}}}, Case{"use_gen_pos_embed", true},
        Case{"hidden_act", "gelu"}, Case{"mlp_bias", true}, Case{"boi", 320}, Case{"image_placeholder_id", -1},
        Case{"hidden_size", nullptr}, Case{"num_key_value_heads", 3}, Case{"hidden_size", "64"}}) {
    absl::StatusOr<NextStepConfig> parsed = ParseNextStepConfig(TinyConfigWith(c.key, c.value), "config.json");
    ASSERT_FALSE(parsed.ok()) << c.key << " = " << c.value.dump();
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string field = c.key == "num_key_value_heads" ? "num_key_value_heads" : c.key;
    EXPECT_NE(parsed.status().message().find(field), std::string::npos) << parsed.status();
  }
  EXPECT_FALSE(ParseNextStepConfig("[1]", "config.json").ok());
  EXPECT_FALSE(ParseNextStepConfig("{", "config.json").ok());
}

TEST(NextStepConfigTest, VaeConfigDefaultsAreTheOfficialOnesAndBadValuesAreRefused) {
  absl::StatusOr<NextStepVaeConfig> defaults = ParseNextStepVaeConfig("{}", "vae/config.json");
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->ch, 128);
  EXPECT_EQ(defaults->ch_mult, (std::vector<int32_t>{1, 2, 4, 4}));
  EXPECT_EQ(defaults->z_channels, 16);
  EXPECT_EQ(defaults->downsample(), 8);
  EXPECT_DOUBLE_EQ(defaults->scaling_factor, 0.3611);
  EXPECT_DOUBLE_EQ(defaults->shift_factor, 0.1159);
  for (const char* bad : {R"({"ch_mult": []})", R"({"ch": 40})", R"({"out_ch": 4})", R"({"scaling_factor": 0})",
                          R"({"num_res_blocks": 0})"}) {
    absl::StatusOr<NextStepVaeConfig> c = ParseNextStepVaeConfig(bad, "vae/config.json");
    EXPECT_FALSE(c.ok()) << bad;
    EXPECT_NE(c.status().message().find("vae/config.json"), std::string::npos) << c.status();
  }
}

// Every tensor the map names is in the published layout with that shape.
TEST(NextStepSpecTest, EveryMappedTensorIsInTheCheckpointWithItsShape) {
  absl::StatusOr<NextStepConfig> c = LoadNextStepConfig(Dir());
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::Checkpoint::Open(Dir());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  model::ModelSpec spec = NextStepStackSpec(*c);
  std::vector<model::TensorRef> refs;
  for (const model::TensorRef* t : model::AllTensors(spec)) refs.push_back(*t);
  for (const model::LinearRef& l : {ImageInProjector(*c), ImageOutProjector(*c)}) {
    refs.push_back(l.weight);
    refs.push_back(l.bias);
  }
  const FlowHeadDims dims{c->token_dim(), c->hidden_size, c->fm_head_dim, c->fm_head_layers};
  for (const model::TensorRef& t : FlowHeadTensors(kFlowHeadPrefix, dims)) refs.push_back(t);
  int32_t biases = 0;
  for (const model::TensorRef& t : refs) {
    absl::StatusOr<const checkpoint::TensorInfo*> info = (*ckpt)->Find(t.name);
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ((*info)->shape, t.shape) << t.name;
    if (t.name.find("self_attn") != std::string::npos && t.name.ends_with(".bias")) ++biases;
  }
  EXPECT_EQ(biases, 3 * c->num_hidden_layers);  // q, k, v; no o_proj bias
  EXPECT_FALSE((*ckpt)->Has("layers.0.self_attn.o_proj.bias"));
}

}  // namespace
}  // namespace argen::nextstep
