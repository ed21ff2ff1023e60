// Anole through the registry and the generic engine on the CPU (the tiny
// random model of tests/goldens/tiny/tiny-anole-*): both layouts are picked
// as the anole family (Meta's by its files, the -hf conversion by its folder's
// name, while the Lumina-mGPT goldens stay lumina), the info is Anole's (32 x
// 32 codes without row breaks, 1,024 tokens, cfg 3 / temperature 0.7 /
// top-p 0.9), every sparsity policy runs on that grid, a greedy request gives
// transformers' greedy loop's 1,024 tokens in both layouts and its VQGAN image
// (tools/goldens/make_anole_tiny.py) within one level, and a broken
// checkpoint is a load error naming the file and the tensor or field.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "engine/checkpoint/weights_file.h"
#include "engine/families/anole/anole_family.h"
#include "engine/families/lumina/lumina_vq16.h"
#include "engine/families/registry.h"
#include "engine/model/create_engine.h"
#include "engine/sparse/policy_params.h"
#include "engine/vqgan/vqgan_config.h"
#include "engine/vqgan/vqgan_weights.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/golden_files.h"

namespace argen::anole {
namespace {

namespace fs = std::filesystem;
using test_support::SourceDir;

std::string HfDir() { return SourceDir() + "/tests/goldens/tiny/tiny-anole-hf"; }
std::string MetaDir() { return SourceDir() + "/tests/goldens/tiny/tiny-anole-meta"; }
constexpr int32_t kFirstImage = 4, kCodes = 64;

std::unique_ptr<model::GenericEngine> MakeEngine(const std::string& dir, families::FamilyOptions family_options = {}) {
  engine::EngineOptions options;
  options.model_dir = dir;
  options.threads = 2;
  options.family_options = std::move(family_options);
  absl::StatusOr<std::unique_ptr<model::GenericEngine>> e = model::CreateGenericEngine(options);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? std::move(*e) : nullptr;
}

std::vector<std::vector<int32_t>> Generate(model::GenericEngine& e, engine::GenerationRequest r) {
  absl::StatusOr<engine::PreparedRequest> p = e.Prepare(r);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return {};
  EXPECT_EQ(p->policy.l_dec, 1024);
  absl::StatusOr<engine::GroupId> id = e.Add(*p);
  EXPECT_TRUE(id.ok()) << id.status();
  if (!id.ok()) return {};
  for (int32_t step = 0; step <= e.info().image_tokens; ++step) EXPECT_TRUE(e.Step().ok());
  absl::StatusOr<engine::GroupState> s = e.State(*id);
  EXPECT_TRUE(s.ok() && s->finished);
  std::vector<std::vector<int32_t>> tokens = s.ok() ? s->tokens : std::vector<std::vector<int32_t>>{};
  e.Remove(*id);
  return tokens;
}

engine::GenerationRequest Request(uint64_t seed) {
  engine::GenerationRequest r;
  r.prompt = "a red cube";
  r.sampling = engine::SamplingParams{};
  r.sampling.cfg_weight = kDefaultCfgWeight;
  r.sampling.temperature = kDefaultTemperature;
  r.sampling.top_p = kDefaultTopP;
  r.sampling.top_k = 0;
  r.sampling.seed = seed;
  return r;
}

TEST(AnoleRegistryTest, BothLayoutsAreAnoleAndLuminaStaysLumina) {
  absl::StatusOr<families::FamilyModel> meta = families::LoadFamilyModel(MetaDir(), {});
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->family, "anole");
  absl::StatusOr<families::FamilyModel> hf =
      families::LoadFamilyModel(HfDir(), {{"vqgan_dir", "../tiny-anole-meta/tokenizer"}});
  ASSERT_TRUE(hf.ok()) << hf.status();
  EXPECT_EQ(hf->family, "anole");
  absl::StatusOr<families::FamilyModel> lumina =
      families::LoadFamilyModel(SourceDir() + "/models/argen-lumina-scenes-v1", {});
  ASSERT_TRUE(lumina.ok()) << lumina.status();
  EXPECT_EQ(lumina->family, "lumina");
  // Meta's weights folder itself (models/7b) finds the tokenizer folder two levels up.
  absl::StatusOr<families::FamilyModel> inner = families::LoadFamilyModel(MetaDir() + "/models/7b", {});
  ASSERT_TRUE(inner.ok()) << inner.status();
  EXPECT_EQ(inner->family, "anole");
}

TEST(AnoleEngineTest, InfoIsAnolesGridAndSampling) {
  std::unique_ptr<model::GenericEngine> e = MakeEngine(MetaDir());
  ASSERT_NE(e, nullptr);
  const engine::ModelInfo& info = e->info();
  EXPECT_EQ(info.family, "anole");
  EXPECT_EQ(info.image_tokens, 1024);
  EXPECT_EQ(info.token_grid, 32);
  EXPECT_EQ(info.grid.width, 32);
  EXPECT_EQ(info.grid.row_break_tokens, 0);
  EXPECT_EQ(info.grid.l_dec, 1024);
  EXPECT_EQ(info.image_size, 64);  // 32 codes x the tiny VQGAN's 2x (the published one's 16x: 512)
  EXPECT_EQ(info.image_vocab, kCodes);
  EXPECT_FLOAT_EQ(info.default_sampling.cfg_weight, 3.0f);
  EXPECT_FLOAT_EQ(info.default_sampling.temperature, 0.7f);
  EXPECT_FLOAT_EQ(info.default_sampling.top_p, 0.9f);
  EXPECT_EQ(info.default_sampling.top_k, 0);
}

TEST(AnoleEngineTest, GreedyImageIsTransformersLoopsInBothLayouts) {
  std::unique_ptr<model::GenericEngine> meta = MakeEngine(MetaDir());
  std::unique_ptr<model::GenericEngine> hf = MakeEngine(HfDir(), {{"vqgan_dir", "../tiny-anole-meta/tokenizer"}});
  ASSERT_NE(meta, nullptr);
  ASSERT_NE(hf, nullptr);
  engine::GenerationRequest r = Request(7);
  r.sampling.temperature = 0.0f;  // argmax of the guided logits: layout differences would show
  const auto a = Generate(*meta, r);
  const auto b = Generate(*hf, r);
  ASSERT_EQ(a.size(), 1u);
  ASSERT_EQ(a, b);
  // transformers' loop: the argmax of the guided logits fed back for 1,024 steps.
  const nlohmann::json greedy = test_support::ReadJson("tests/goldens/tiny/tiny-anole-hf/goldens.json")["greedy"];
  ASSERT_EQ(greedy["caption"], r.prompt);
  EXPECT_EQ(a[0], greedy["tokens"].get<std::vector<int32_t>>());
  absl::StatusOr<std::vector<engine::RgbImage>> images = meta->DecodeImages(a);
  ASSERT_TRUE(images.ok()) << images.status();
  const engine::RgbImage& image = (*images)[0];
  EXPECT_EQ(image.width, 64);
  EXPECT_EQ(image.height, 64);
  // Chameleon's VQGAN (tools/lumina_torch/vqgan.py) on the same codes: within one level (truncation ties).
  std::ifstream in(MetaDir() + "/greedy_rgb8", std::ios::binary);
  const std::string rgb8((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_EQ(image.rgb.size(), rgb8.size());
  int off = 0;
  for (size_t i = 0; i < rgb8.size(); ++i) {
    const int d = std::abs(static_cast<int>(image.rgb[i]) - static_cast<uint8_t>(rgb8[i]));
    EXPECT_LE(d, 1) << "byte " << i;
    off += d != 0;
  }
  EXPECT_LE(off, static_cast<int>(rgb8.size() / 100));
}

// The head_dim 16 model (tiny-anole-cuda-*, the CUDA test's; tools/goldens/make_anole_tiny_cuda.py) in both
// layouts: the CPU engine's greedy image is transformers' loop's too, so the CUDA test's reference is checked.
TEST(AnoleEngineTest, GreedyImageOfTheHeadDim16ModelIsTransformersLoops) {
  const families::FamilyOptions shared_vqgan = {{"vqgan_dir", "../tiny-anole-meta/tokenizer"}};
  const std::string root = SourceDir() + "/tests/goldens/tiny/";
  const nlohmann::json greedy = test_support::ReadJson("tests/goldens/tiny/tiny-anole-cuda-hf/goldens.json")["greedy"];
  for (const char* dir : {"tiny-anole-cuda-hf", "tiny-anole-cuda-meta"}) {
    std::unique_ptr<model::GenericEngine> e = MakeEngine(root + dir, shared_vqgan);
    ASSERT_NE(e, nullptr) << dir;
    EXPECT_EQ(e->info().head_dim, 16) << dir;
    engine::GenerationRequest r = Request(7);
    r.prompt = greedy["caption"].get<std::string>();
    r.sampling.temperature = 0.0f;
    const auto tokens = Generate(*e, r);
    ASSERT_EQ(tokens.size(), 1u) << dir;
    EXPECT_EQ(tokens[0], greedy["tokens"].get<std::vector<int32_t>>()) << dir;
  }
}

// The CUDA engine's default image decoder (vq_backend auto with backend cuda) is the GPU VQ-16 decoder over
// Chameleon's VQGAN (lumina_vq16.h): the tiny VQGAN the tests serve must convert, at Anole's 32 x 32 grid.
TEST(AnoleEngineTest, TheGpuDecoderBindingTakesTheVqgan) {
  const std::string dir = MetaDir() + "/tokenizer";
  absl::StatusOr<vqgan::VqganConfig> config = vqgan::LoadVqganYaml(dir + "/vqgan.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::OpenCheckpointFile(dir + "/vqgan.ckpt");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  absl::StatusOr<vqgan::VqganDecoderWeights> weights =
      vqgan::LoadVqganDecoderWeights(vqgan::CheckpointTensorSource(**ckpt), *config);
  ASSERT_TRUE(weights.ok()) << weights.status();
  absl::StatusOr<std::pair<vq::VqDecoderWeights, vq::Vq16Config>> vq16 = lumina::AsVq16(*weights, *config, kGridSide);
  ASSERT_TRUE(vq16.ok()) << vq16.status();
  EXPECT_EQ(vq16->second.image_size, 64);
  EXPECT_EQ(vq16->second.codebook_size, kCodes);
}

TEST(AnoleEngineTest, EveryPolicyRunsOnTheGrid) {
  std::unique_ptr<model::GenericEngine> e = MakeEngine(MetaDir());
  ASSERT_NE(e, nullptr);
  for (const sparse::PolicyKind kind : sparse::kAllPolicyKinds) {
    if (kind == sparse::PolicyKind::kSsd) continue;  // needs ssd_heads.json (none for the tiny model)
    engine::GenerationRequest r = Request(3);
    r.policy.kind = kind;
    r.policy.sparsity = kind == sparse::PolicyKind::kDense ? 0.0 : 0.6;
    const auto tokens = Generate(*e, r);
    ASSERT_EQ(tokens.size(), 1u) << sparse::PolicyName(kind);
    ASSERT_EQ(tokens[0].size(), 1024u) << sparse::PolicyName(kind);
    for (int32_t v : tokens[0]) ASSERT_TRUE(v >= kFirstImage && v < kFirstImage + kCodes) << v;
  }
}

// A copy of the Meta folder whose params.json or files are changed by `edit`.
fs::path MetaCopy(const std::string& name, const std::function<void(const fs::path&)>& edit) {
  const fs::path dir = fs::path(::testing::TempDir()) / (name + "_" + std::to_string(::getpid())) / "anole";
  fs::remove_all(dir.parent_path());
  fs::create_directories(dir);
  fs::copy(MetaDir(), dir, fs::copy_options::recursive);
  edit(dir);
  return dir;
}

void EditParams(const fs::path& dir, const std::function<void(nlohmann::json&)>& edit) {
  const fs::path p = dir / "models" / "7b" / "params.json";
  nlohmann::json params = nlohmann::json::parse(std::ifstream(p));
  edit(params);
  std::ofstream(p) << params.dump();
}

std::string LoadError(const fs::path& dir, const families::FamilyOptions& options = {}) {
  absl::StatusOr<families::FamilyModel> m = families::LoadFamilyModel(dir.string(), options);
  return m.ok() ? "loaded" : std::string(m.status().message());
}

TEST(AnoleLoadTest, MismatchedOrCorruptCheckpointsNameTheFileAndTensor) {
  const fs::path more_layers = MetaCopy(
      "anole_layers", [](const fs::path& d) { EditParams(d, [](nlohmann::json& p) { p["model"]["n_layers"] = 3; }); });
  std::string error = LoadError(more_layers);
  EXPECT_NE(error.find("consolidated.pth"), std::string::npos) << error;
  EXPECT_NE(error.find("layers.2.attention.wq.weight"), std::string::npos) << error;

  const fs::path wider = MetaCopy(
      "anole_dim", [](const fs::path& d) { EditParams(d, [](nlohmann::json& p) { p["model"]["dim"] = 32; }); });
  error = LoadError(wider);
  EXPECT_NE(error.find("consolidated.pth"), std::string::npos) << error;
  EXPECT_NE(error.find("tok_embeddings.weight"), std::string::npos) << error;
  EXPECT_NE(error.find("has shape"), std::string::npos) << error;

  const fs::path no_dim = MetaCopy(
      "anole_nodim", [](const fs::path& d) { EditParams(d, [](nlohmann::json& p) { p["model"].erase("dim"); }); });
  error = LoadError(no_dim);
  EXPECT_NE(error.find("params.json"), std::string::npos) << error;
  EXPECT_NE(error.find("'dim'"), std::string::npos) << error;

  const fs::path truncated = MetaCopy(
      "anole_truncated", [](const fs::path& d) { fs::resize_file(d / "models" / "7b" / "consolidated.pth", 4096); });
  error = LoadError(truncated);
  EXPECT_NE(error.find("consolidated.pth"), std::string::npos) << error;

  const fs::path no_vqgan =
      MetaCopy("anole_novq", [](const fs::path& d) { fs::remove(d / "tokenizer" / "vqgan.yaml"); });
  error = LoadError(no_vqgan);
  EXPECT_NE(error.find("vqgan.yaml"), std::string::npos) << error;
  EXPECT_NE(error.find("vqgan_dir"), std::string::npos) << error;
  for (const fs::path& d : {more_layers, wider, no_dim, truncated, no_vqgan}) fs::remove_all(d.parent_path());
}

TEST(AnoleLoadTest, HfConfigThatDoesNotMatchItsWeightsNamesTheTensor) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("anole_hf_" + std::to_string(::getpid())) / "tiny-anole-hf";
  fs::remove_all(dir.parent_path());
  fs::create_directories(dir);
  fs::copy(HfDir(), dir, fs::copy_options::recursive);
  const fs::path config_path = dir / "config.json";
  nlohmann::json config = nlohmann::json::parse(std::ifstream(config_path));
  config["intermediate_size"] = 64;
  std::ofstream(config_path) << config.dump();
  engine::EngineOptions options;
  options.model_dir = dir.string();
  options.family_options = {{"vqgan_dir", MetaDir() + "/tokenizer"}};
  absl::StatusOr<std::unique_ptr<model::GenericEngine>> e = model::CreateGenericEngine(options);
  ASSERT_FALSE(e.ok());
  const std::string error(e.status().message());
  EXPECT_NE(error.find("model.safetensors"), std::string::npos) << error;
  EXPECT_NE(error.find("mlp.gate_proj.weight"), std::string::npos) << error;
  fs::remove_all(dir.parent_path());
}

TEST(AnoleLoadTest, HfLayoutWithoutTheVqganOrWithAForeignOptionIsRefused) {
  std::string error = LoadError(HfDir());  // <model_dir>/tokenizer does not exist in the -hf folder
  EXPECT_NE(error.find("vqgan.yaml"), std::string::npos) << error;
  error = LoadError(MetaDir(), {{"vq_dir", "x"}});
  EXPECT_NE(error.find("family option 'vq_dir'"), std::string::npos) << error;
  EXPECT_NE(error.find("anole"), std::string::npos) << error;
}

}  // namespace
}  // namespace argen::anole
