// The LlamaGen family (class-conditional) against the OFFICIAL PyTorch code
// (tests/goldens/tiny/tiny-llamagen-c2i, made by
// tools/goldens/make_llamagen_goldens.py from FoundationVision/LlamaGen's
// gpt.py / generate.py / vq_model.py): the decoder logits with 2-D RoPE of the
// prefill (the class token, position-free) and of KV-cache decode steps over
// the 5x5 grid (row and column changes), relative error 1e-4 in fp32; the
// greedy (cfg 4, argmax) token sequence exactly; the VQ decode of it within
// one level of uint8. And the published-layout rules: the class/caption
// conditions, the missing VQ file, the c2i_<size>_<px>.pt names.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "engine/checkpoint/weights_file.h"
#include "engine/engine.h"
#include "engine/families/llamagen/llamagen_config.h"
#include "engine/families/llamagen/llamagen_family.h"
#include "engine/families/llamagen/llamagen_spec.h"
#include "engine/families/llamagen/tests/llamagen_test_util.h"
#include "engine/families/registry.h"
#include "engine/kv/kv_manager.h"
#include "engine/model/backend_registry.h"
#include "engine/model/create_engine.h"
#include "engine/model/weight_source.h"
#include "engine/sparse/policy_params.h"
#include "engine/vq/vq_decoder.h"
#include "engine/vq/vq_weights.h"
#include "gtest/gtest.h"
#include "tests/support/golden_files.h"

namespace argen::llamagen {
namespace {

namespace fs = std::filesystem;
using test_support::ReadF32;
using test_support::ReadJson;
using test_support::RelativeError;
using test_support::SourceDir;
using test_util::ExpectImageMatchesRgb8;
using test_util::GreedyLogits;
using test_util::GreedyRequest;
using test_util::ReadGreedyLogits;

constexpr double kTolerance = 1e-4;
const char kRel[] = "tests/goldens/tiny/tiny-llamagen-c2i";

std::string Dir() { return SourceDir() + "/" + kRel; }

TEST(LlamaGenConfigTest, TinyConfigAndTheFileNameTable) {
  absl::StatusOr<LlamaGenConfig> c = LoadLlamaGenConfig(Dir());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->gpt_file, "c2i_tiny.pt");
  EXPECT_EQ(c->grid(), 5);
  EXPECT_EQ(c->class_rows, 11);
  EXPECT_EQ(c->ffn_hidden, 192);  // find_multiple(int(2 * 256 / 3), 32)
  // gpt.py's FeedForward for the published shapes (multiple_of 256).
  EXPECT_EQ(FfnHidden(768, 0, 256), 2048);
  EXPECT_EQ(FfnHidden(1280, 0, 256), 3584);
  EXPECT_EQ(FfnHidden(1024, 0, 256), 2816);
  absl::StatusOr<LlamaGenConfig> xl = PublishedLlamaGenConfig("XL", 384);
  ASSERT_TRUE(xl.ok()) << xl.status();
  EXPECT_EQ(xl->dim, 1280);
  EXPECT_EQ(xl->n_layer, 36);
  EXPECT_EQ(xl->head_dim(), 64);
  EXPECT_EQ(xl->ffn_hidden, 3584);
  EXPECT_EQ(xl->grid(), 24);
  EXPECT_EQ(xl->class_rows, 1001);
  EXPECT_FALSE(PublishedLlamaGenConfig("Q", 256).ok());
  EXPECT_FALSE(PublishedLlamaGenConfig("B", 0).ok());
  EXPECT_TRUE(IsC2iFileName("c2i_XL_384.pt"));
  EXPECT_TRUE(IsC2iFileName("c2i_B_256.pt"));
  EXPECT_FALSE(IsC2iFileName("t2i_XL_stage1_256.pt"));
  EXPECT_FALSE(IsC2iFileName("c2i_Q_256.pt"));
}

TEST(LlamaGenSpecTest, TheTensorMapAndTheTwoDRopeChecks) {
  absl::StatusOr<LlamaGenConfig> c = LoadLlamaGenConfig(Dir());
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<model::ModelSpec> spec = LlamaGenSpec(*c);
  ASSERT_TRUE(spec.ok()) << spec.status();
  // The fused wqkv [3 dim, dim] read as three row blocks.
  const model::LayerRefs& l = spec->layers[1];
  EXPECT_EQ(l.q.weight.name, "layers.1.attention.wqkv.weight");
  EXPECT_EQ(l.k.weight.row_begin, 64);
  EXPECT_EQ(l.v.weight.row_begin, 128);
  EXPECT_EQ(l.v.weight.rows, 64);
  EXPECT_EQ(spec->stack.rope, model::RopeKind::kGrid2d);
  EXPECT_EQ(spec->text_vocab(), 11);  // 10 classes + the unconditional row
  model::ModelSpec odd = *spec;
  odd.stack.num_heads = odd.stack.num_kv_heads = 32;
  odd.stack.head_dim = 2;  // pairs do not split into rows and columns
  EXPECT_NE(model::CheckSpec(odd).message().find("2-D RoPE needs head_dim divisible by 4"), std::string::npos);
  model::ModelSpec gridless = *spec;
  gridless.stack.rope_grid_width = 0;
  EXPECT_NE(model::CheckSpec(gridless).message().find("rope_grid_width"), std::string::npos);
}

// A copy of the tiny model in the published layout: no config.json, the GPT
// file renamed c2i_<size>_<px>.pt gives GPT-B at 256 px, which the tiny
// weights do not have: the load names the tensor and both shapes.
TEST(LlamaGenConfigTest, PublishedNamesGiveTheShapeAndAMissingVqFileIsNamed) {
  const fs::path dir = fs::temp_directory_path() / ("llamagen_layout_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(Dir() + "/c2i_tiny.pt", dir / "c2i_B_256.pt");
  absl::StatusOr<families::FamilyModel> m = families::LoadFamilyModel(dir.string());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("vq_ds16_c2i.pt is missing"), std::string::npos) << m.status();
  fs::copy_file(Dir() + "/vq_ds16_c2i.pt", dir / "vq_ds16_c2i.pt");
  m = families::LoadFamilyModel(dir.string());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->family, "llamagen");
  EXPECT_EQ(m->spec.stack.hidden_size, 768);  // GPT-B
  EXPECT_EQ(m->spec.stack.num_layers, 12);
  EXPECT_EQ(m->spec.stack.rope_grid_width, 16);  // 256 px / 16
  engine::EngineOptions options;
  options.model_dir = dir.string();
  absl::StatusOr<std::unique_ptr<model::GenericEngine>> e = model::CreateGenericEngine(options);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("c2i_B_256.pt: tensor 'cls_embedding.embedding_table.weight' has shape "
                                      "[11, 64], expected [1001, 768]"),
            std::string::npos)
      << e.status();
  fs::remove_all(dir);
}

TEST(LlamaGenLogitsTest, PrefillAndDecodeMatchTheOfficialGpt) {
  const nlohmann::json golden = ReadJson(std::string(kRel) + "/goldens.json");
  absl::StatusOr<LlamaGenConfig> config = LoadLlamaGenConfig(Dir());
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<model::ModelSpec> spec = LlamaGenSpec(*config);
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::OpenCheckpointFile(Dir() + "/c2i_tiny.pt");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  ASSERT_TRUE(model::ValidateTensors(**ckpt, *spec).ok()) << model::ValidateTensors(**ckpt, *spec);
  model::BackendOptions options;
  options.max_prompt_tokens = 4;
  absl::StatusOr<std::unique_ptr<model::Backend>> backend =
      model::CreateCpuBackend(*spec, model::CheckpointWeights(std::move(*ckpt)), options);
  ASSERT_TRUE(backend.ok()) << backend.status();
  model::Backend& be = **backend;
  kv::KvManager kv(be);

  GreedyLogits golden_logits;
  ASSERT_NO_FATAL_FAILURE(ReadGreedyLogits(Dir(), golden, &golden_logits));
  const int32_t vocab = golden_logits.vocab, steps = golden_logits.steps;
  ASSERT_EQ(vocab, spec->logits());
  const std::vector<int32_t>& greedy = golden_logits.greedy;

  absl::StatusOr<sparse::ResolvedPolicy> dense = sparse::ResolvePolicy({}, steps);
  ASSERT_TRUE(dense.ok());
  std::vector<model::RowId> rows = {*kv.AllocateRow(1, *dense), *kv.AllocateRow(1, *dense)};
  const std::vector<int32_t> tokens = {golden["class_id"].get<int32_t>(), golden["uncond_class"].get<int32_t>()};
  const std::vector<int32_t> offsets = {0, 1, 2};
  const std::vector<model::SamplingSpec> sampling(1);
  std::vector<int32_t> sampled(1, -1);
  std::vector<float> logits(2 * vocab);
  ASSERT_TRUE(be.Prefill({rows, offsets, tokens, sampling}, {sampled, logits.data()}).ok());
  EXPECT_LE(RelativeError(logits.data(), golden_logits.Row(0, 0)), kTolerance);
  EXPECT_LE(RelativeError(logits.data() + vocab, golden_logits.Row(0, 1)), kTolerance);
  for (int32_t t = 0; t + 1 < steps; ++t) {
    const std::vector<int32_t> input = {greedy[t]}, step = {t};
    ASSERT_TRUE(be.Decode({rows, input, step, sampling}, {sampled, logits.data()}).ok());
    for (int32_t side = 0; side < 2; ++side) {
      EXPECT_LE(RelativeError(logits.data() + side * vocab, golden_logits.Row(t + 1, side)), kTolerance)
          << "decode " << t << (side == 0 ? " cond" : " uncond");
    }
  }
  for (model::RowId r : rows) kv.FreeRow(r);
}

// vq_ds16_c2i.pt through the VQ-16 decoder (no gen_vision_model. prefix):
// VQModel.decode_code's float pixels within 1e-4.
TEST(LlamaGenVqTest, DecodeCodeMatchesTheOfficialVqModel) {
  const nlohmann::json golden = ReadJson(std::string(kRel) + "/goldens.json");
  absl::StatusOr<LlamaGenConfig> c = LoadLlamaGenConfig(Dir());
  ASSERT_TRUE(c.ok()) << c.status();
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt =
      checkpoint::OpenCheckpointFile(Dir() + "/vq_ds16_c2i.pt");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  absl::StatusOr<vq::VqDecoderWeights> weights = vq::LoadVqDecoderWeights(**ckpt, c->vq, "");
  ASSERT_TRUE(weights.ok()) << weights.status();
  absl::StatusOr<std::unique_ptr<vq::VqDecoder>> decoder = vq::VqDecoder::Create(*std::move(weights), c->vq);
  ASSERT_TRUE(decoder.ok()) << decoder.status();
  const std::vector<float> want = ReadF32(Dir() + "/pixels.f32");
  std::vector<float> chw;
  ASSERT_TRUE((*decoder)->DecodeToFloat(golden["greedy_tokens"].get<std::vector<int32_t>>(), &chw).ok());
  ASSERT_EQ(chw.size(), want.size());
  for (size_t p = 0; p < want.size(); ++p) {
    ASSERT_LE(std::abs(chw[p] - want[p]) / std::max(1.0f, std::abs(want[p])), 1e-4f) << "value " << p;
  }
}

std::unique_ptr<model::GenericEngine> TinyEngine() { return test_util::TinyEngine(Dir()); }

engine::GenerationRequest ClassRequest(int32_t class_id) {
  engine::GenerationRequest r = GreedyRequest(4.0f);
  r.class_id = class_id;
  return r;
}

TEST(LlamaGenEngineTest, GreedyTokensAndImageMatchTheOfficialGenerate) {
  const nlohmann::json golden = ReadJson(std::string(kRel) + "/goldens.json");
  std::unique_ptr<model::GenericEngine> e = TinyEngine();
  ASSERT_NE(e, nullptr);
  const engine::ModelInfo& info = e->info();
  EXPECT_EQ(info.family, "llamagen");
  EXPECT_EQ(info.num_classes, 10);
  EXPECT_EQ(info.image_size, 20);
  EXPECT_EQ(info.image_tokens, 25);
  EXPECT_EQ(info.default_sampling.cfg_weight, 4.0f);
  EXPECT_EQ(info.default_sampling.top_k, 64);  // 2000, capped by the tiny codebook
  absl::StatusOr<engine::PreparedRequest> p = e->Prepare(ClassRequest(golden["class_id"].get<int32_t>()));
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->cond_ids, std::vector<int32_t>{3});
  EXPECT_EQ(p->uncond_ids, std::vector<int32_t>{10});
  absl::StatusOr<engine::GroupId> id = e->Add(*p);
  ASSERT_TRUE(id.ok()) << id.status();
  for (int32_t step = 0; step <= info.image_tokens; ++step) ASSERT_TRUE(e->Step().ok());
  absl::StatusOr<engine::GroupState> s = e->State(*id);
  ASSERT_TRUE(s.ok() && s->finished);
  EXPECT_EQ(s->tokens[0], golden["greedy_tokens"].get<std::vector<int32_t>>());
  absl::StatusOr<std::vector<engine::RgbImage>> images = e->DecodeImages({s->tokens[0]});
  ASSERT_TRUE(images.ok()) << images.status();
  ASSERT_EQ(images->size(), 1u);
  EXPECT_EQ((*images)[0].width, 20);
  EXPECT_EQ((*images)[0].height, 20);
  ASSERT_NO_FATAL_FAILURE(ExpectImageMatchesRgb8((*images)[0], Dir() + "/rgb8"));
  e->Remove(*id);
}

TEST(LlamaGenEngineTest, ClassAndCaptionAreCheckedAgainstTheModel) {
  std::unique_ptr<model::GenericEngine> e = TinyEngine();
  ASSERT_NE(e, nullptr);
  engine::GenerationRequest caption = ClassRequest(1);
  caption.prompt = "a cat";
  absl::StatusOr<engine::PreparedRequest> p = e->Prepare(caption);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("prompt:"), std::string::npos) << p.status();
  engine::GenerationRequest none = ClassRequest(1);
  none.class_id.reset();
  p = e->Prepare(none);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("class_id: required"), std::string::npos) << p.status();
  for (int32_t bad : {-1, 10, 1000}) {
    p = e->Prepare(ClassRequest(bad));
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find("class_id: must be in [0, 10)"), std::string::npos) << p.status();
  }
}

// Every policy on LlamaGen's grid (5 x 5 codes in raster order, no row
// breaks: the grid policies read its width), two images sharing their prompt
// KV (the one class token), alongside a dense request in the same batch.
TEST(LlamaGenEngineTest, EveryPolicyRunsOnTheGrid) {
  std::unique_ptr<model::GenericEngine> e = TinyEngine();
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->info().grid.width, 5);
  EXPECT_EQ(e->info().grid.row_break_tokens, 0);
  for (const sparse::PolicyKind kind : sparse::kAllPolicyKinds) {
    if (kind == sparse::PolicyKind::kSsd) continue;  // needs ssd_heads.json (none for the tiny model)
    engine::GenerationRequest r = ClassRequest(5);
    r.num_images = 2;
    r.sampling.temperature = 1.0f;
    r.policy.kind = kind;
    r.policy.sparsity = kind == sparse::PolicyKind::kDense ? 0.0 : 0.6;
    absl::StatusOr<engine::PreparedRequest> p = e->Prepare(r);
    ASSERT_TRUE(p.ok()) << sparse::PolicyName(kind) << ": " << p.status();
    absl::StatusOr<engine::GroupId> id = e->Add(*p);
    ASSERT_TRUE(id.ok()) << id.status();
    absl::StatusOr<engine::GroupId> dense = e->Add(*e->Prepare(ClassRequest(6)));
    ASSERT_TRUE(dense.ok()) << dense.status();
    for (int32_t step = 0; step <= e->info().image_tokens; ++step) ASSERT_TRUE(e->Step().ok());
    for (engine::GroupId g : {*id, *dense}) {
      absl::StatusOr<engine::GroupState> s = e->State(g);
      ASSERT_TRUE(s.ok() && s->finished) << sparse::PolicyName(kind);
      for (const std::vector<int32_t>& image : s->tokens) {
        ASSERT_EQ(image.size(), 25u);
        for (int32_t v : image) EXPECT_TRUE(v >= 0 && v < 64) << v;
      }
      e->Remove(g);
    }
  }
}

// Prompt-KV sharing on LlamaGen's class prompts: two requests of one class
// (two images each, so within a request too) give the same tokens whether
// the rows of one class share one copy of its prompt KV across requests or not.
TEST(LlamaGenEngineTest, PromptSharingAcrossRequestsChangesNoToken) {
  std::vector<std::vector<std::vector<int32_t>>> runs;
  std::vector<int64_t> kv_in_use;  // after the prefill, both requests running
  for (const bool share : {false, true}) {
    std::unique_ptr<model::GenericEngine> e = test_util::TinyEngine(Dir(), share);
    ASSERT_NE(e, nullptr);
    std::vector<engine::GroupId> ids;
    for (const uint64_t seed : {21u, 22u}) {
      engine::GenerationRequest r = ClassRequest(6);
      r.num_images = 2;
      r.sampling.temperature = 1.0f;
      r.sampling.seed = seed;
      absl::StatusOr<engine::PreparedRequest> p = e->Prepare(r);
      ASSERT_TRUE(p.ok()) << p.status();
      absl::StatusOr<engine::GroupId> id = e->Add(*p);
      ASSERT_TRUE(id.ok()) << id.status();
      ids.push_back(*id);
    }
    for (int32_t step = 0; step <= e->info().image_tokens; ++step) {
      ASSERT_TRUE(e->Step().ok());
      if (step == 0) kv_in_use.push_back(e->KvBytesInUse());
    }
    std::vector<std::vector<int32_t>> tokens;
    for (engine::GroupId id : ids) {
      absl::StatusOr<engine::GroupState> s = e->State(id);
      ASSERT_TRUE(s.ok() && s->finished);
      tokens.insert(tokens.end(), s->tokens.begin(), s->tokens.end());
      e->Remove(id);
    }
    EXPECT_EQ(e->KvBytesInUse(), 0);
    runs.push_back(tokens);
  }
  ASSERT_EQ(runs[0].size(), 4u);
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_LT(kv_in_use[1], kv_in_use[0]) << "the shared run holds one copy of the class prompt's KV";
}

TEST(LlamaGenEngineTest, ATextModelRefusesAClassId) {
  engine::EngineOptions options;
  options.model_dir = SourceDir() + "/tests/goldens/tiny/tiny-mha";
  options.threads = 1;
  absl::StatusOr<std::unique_ptr<model::GenericEngine>> e = model::CreateGenericEngine(options);
  ASSERT_TRUE(e.ok()) << e.status();
  engine::GenerationRequest r;
  r.prompt = "a red circle";
  r.class_id = 3;
  absl::StatusOr<engine::PreparedRequest> p = (*e)->Prepare(r);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("class_id: this model (janus) is text-conditional"), std::string::npos)
      << p.status();
}

}  // namespace
}  // namespace argen::llamagen
