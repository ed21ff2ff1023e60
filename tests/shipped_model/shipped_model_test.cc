// The embedded default model (models/argen-scenes-v1) loads through the
// official-layout loader and, on the CPU engine, draws what a prompt asks for.
// Guards the shipped files and the whole generation path against regressions.
#include <cstdlib>
#include <filesystem>
#include <string>

#include "engine/checkpoint/checkpoint.h"
#include "engine/engine.h"
#include "engine/families/janus/janus_config.h"
#include "engine/families/janus/janus_spec.h"
#include "engine/families/registry.h"
#include "engine/model/weight_source.h"
#include "engine/sparse/ssd_heads.h"
#include "gtest/gtest.h"
#include "kernels/sparse/policy.h"

namespace argen {
namespace {

std::string ShippedModelDir() {
  const char* root = std::getenv("ARGEN_SOURCE_DIR");
  return std::string(root ? root : ".") + "/models/argen-scenes-v1";
}

TEST(ShippedModelTest, LoadsAndValidatesForGeneration) {
  auto config = janus::LoadJanusConfig(ShippedModelDir());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->gen_vision.token_grid(), 24);
  EXPECT_EQ(config->gen_vision.image_tokens(), 576);
  auto ckpt = checkpoint::Checkpoint::Open(ShippedModelDir());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto spec = janus::JanusSpec(*config);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(model::ValidateTensors(**ckpt, *spec).ok());
  auto family = families::LoadFamilyModel(ShippedModelDir());
  ASSERT_TRUE(family.ok()) << family.status();
  EXPECT_EQ(family->family, "janus");
}

// ssd's head classification ships next to the model (docs/policies.md): it
// loads, covers every (layer, kv head), has both classes, and the engine
// resolves an ssd request with it (per-head classes in the policy).
TEST(ShippedModelTest, ShipsTheSsdHeadClassification) {
  absl::StatusOr<sparse::HeadClasses> heads = sparse::LoadHeadClasses(ShippedModelDir() + "/" + sparse::kSsdHeadsFile);
  ASSERT_TRUE(heads.ok()) << heads.status();
  auto config = janus::LoadJanusConfig(ShippedModelDir());
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(heads->layers, config->language.num_hidden_layers);
  EXPECT_EQ(heads->kv_heads, config->language.num_key_value_heads);
  int semantic = 0;
  for (uint8_t c : heads->semantic) semantic += c;
  EXPECT_GT(semantic, 0);
  EXPECT_LT(semantic, static_cast<int>(heads->semantic.size()));
  engine::EngineOptions options;
  options.model_dir = ShippedModelDir();
  auto engine = engine::CreateEngine(options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  engine::GenerationRequest request;
  request.prompt = "a red circle";
  request.policy.kind = sparse::PolicyKind::kSsd;
  request.policy.sparsity = 0.9;
  auto prepared = (*engine)->Prepare(request);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  EXPECT_EQ(prepared->policy.ssd_heads, static_cast<int32_t>(heads->semantic.size()));
  for (int32_t h = 0; h < prepared->policy.ssd_heads; ++h) {
    EXPECT_EQ(sparse::SsdHeadIsSemantic(prepared->policy, h), heads->semantic[h] == 1) << h;
  }
}

// Janus has one image size (its config's): the engine lists it, takes it
// named or not, and refuses any other naming it.
TEST(ShippedModelTest, JanusServesItsOneSizeAndRefusesOthers) {
  engine::EngineOptions options;
  options.model_dir = ShippedModelDir();
  auto engine = engine::CreateEngine(options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  const engine::ModelInfo& info = (*engine)->info();
  ASSERT_EQ(info.image_layouts.size(), 1u);
  const engine::ImageLayout& only = info.image_layouts[0];
  EXPECT_EQ(only.width, info.image_size);
  EXPECT_EQ(only.height, info.image_size);
  EXPECT_EQ(only.image_tokens, info.image_tokens);
  engine::GenerationRequest request;
  request.prompt = "a red circle";
  request.width = request.height = info.image_size;
  auto named = (*engine)->Prepare(request);
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(named->policy.l_dec, info.image_tokens);
  request.width = 2 * info.image_size;
  auto other = (*engine)->Prepare(request);
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string size = std::to_string(info.image_size) + "x" + std::to_string(info.image_size);
  EXPECT_EQ(other.status().message().rfind("width: ", 0), 0u) << other.status();
  EXPECT_NE(other.status().message().find("supported (WxH): " + size), std::string::npos) << other.status();
}

struct ColorCounts {
  int red = 0, blue = 0;
};

ColorCounts CountSaturated(const engine::RgbImage& image) {
  ColorCounts counts;
  for (size_t i = 0; i + 2 < image.rgb.size(); i += 3) {
    const int r = image.rgb[i], g = image.rgb[i + 1], b = image.rgb[i + 2];
    if (r > 170 && g < 90 && b < 90) ++counts.red;
    if (b > 150 && r < 90 && g < 140) ++counts.blue;
  }
  return counts;
}

// Dense images for a two-color prompt at the model's documented cfg weight (3,
// docs/model.md): the trained model must paint both colors as sizeable regions
// in every image (a broken loader, tokenizer, prompt or sampler gives noise or
// one color). Deterministic: fixed seed on the CPU backend.
TEST(ShippedModelTest, DrawsBothRequestedColors) {
  engine::EngineOptions options;
  options.model_dir = ShippedModelDir();
  options.backend = "cpu";
  auto engine = engine::CreateEngine(options);
  ASSERT_TRUE(engine.ok()) << engine.status();
  engine::GenerationRequest request;
  request.prompt = "a red circle above a blue square";
  request.num_images = 4;
  request.sampling.seed = 3;
  request.sampling.cfg_weight = 3.0f;
  auto prepared = (*engine)->Prepare(request);
  ASSERT_TRUE(prepared.ok()) << prepared.status();
  auto id = (*engine)->Add(*prepared);
  ASSERT_TRUE(id.ok()) << id.status();
  for (int step = 0; step < 1000; ++step) {
    auto report = (*engine)->Step();
    ASSERT_TRUE(report.ok()) << report.status();
    if (!report->finished.empty()) break;
  }
  auto state = (*engine)->State(*id);
  ASSERT_TRUE(state.ok()) << state.status();
  ASSERT_TRUE(state->finished);
  ASSERT_EQ(state->tokens.size(), 4u);
  for (const auto& grid : state->tokens) ASSERT_EQ(grid.size(), 576u);
  (*engine)->Remove(*id);
  EXPECT_EQ((*engine)->KvBytesInUse(), 0);

  auto images = (*engine)->DecodeImages(state->tokens);
  ASSERT_TRUE(images.ok()) << images.status();
  ASSERT_EQ(images->size(), 4u);
  for (size_t i = 0; i < images->size(); ++i) {
    const engine::RgbImage& image = (*images)[i];
    ASSERT_EQ(image.width, 192);
    ASSERT_EQ(image.height, 192);
    const ColorCounts counts = CountSaturated(image);
    // An object spans >= 38 px; demand at least a 30x30 patch of each color.
    EXPECT_GT(counts.red, 900) << "image " << i << " red pixels: " << counts.red;
    EXPECT_GT(counts.blue, 900) << "image " << i << " blue pixels: " << counts.blue;
  }
}

}  // namespace
}  // namespace argen
