// The LlamaGen text-to-image family (tests/goldens/tiny/tiny-llamagen-t2i,
// made by tools/goldens/make_llamagen_t2i_goldens.py from the official code):
// the published layout's rules (t2i_<size>_stage<k>_<px>.pt, vq_ds16_t2i.pt,
// the T5 directory and what is missing); the CPU backend's logits of the
// prefill (the caption's prefix embeddings as prompt vectors, both CFG rows)
// and of teacher-forced decode steps against generate()'s, relative error
// 1e-4; through the engine, the greedy (cfg 7.5, argmax) tokens of the raw
// prompt exactly and the VQ decode within one uint8 level, with the images
// of a request sharing their prompt KV and with sharing across requests
// asked for (prompts of embeddings fall back to sharing within a request);
// a class id or a negative prompt refused naming the field.
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/checkpoint/weights_file.h"
#include "engine/engine.h"
#include "engine/families/llamagen/llamagen_config.h"
#include "engine/families/llamagen/llamagen_spec.h"
#include "engine/families/llamagen/t2i_prompt.h"
#include "engine/families/llamagen/t5_backend.h"
#include "engine/families/llamagen/tests/llamagen_test_util.h"
#include "engine/families/registry.h"
#include "engine/kv/kv_manager.h"
#include "engine/model/backend_registry.h"
#include "engine/model/create_engine.h"
#include "engine/model/step_plan.h"
#include "engine/model/weight_source.h"
#include "engine/sparse/policy_params.h"
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

const char kRel[] = "tests/goldens/tiny/tiny-llamagen-t2i";
std::string Dir() { return SourceDir() + "/" + kRel; }

TEST(LlamaGenT2iConfigTest, TinyConfigIsTextConditional) {
  absl::StatusOr<LlamaGenConfig> c = LoadLlamaGenConfig(Dir());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->text_conditional);
  EXPECT_EQ(c->gpt_file, "t2i_tiny.pt");
  EXPECT_EQ(c->vq_file, "vq_ds16_t2i.pt");
  EXPECT_EQ(c->cls_token_num, 120);
  EXPECT_EQ(c->caption_dim, 32);
  EXPECT_EQ(c->t5_dir, Dir() + "/flan-t5-tiny");
  EXPECT_EQ(c->grid(), 5);
  EXPECT_TRUE(IsT2iFileName("t2i_XL_stage1_256.pt"));
  EXPECT_TRUE(IsT2iFileName("t2i_XL_stage2_512.pt"));
  EXPECT_FALSE(IsT2iFileName("t2i_XL_512.pt"));
  EXPECT_FALSE(IsC2iFileName("t2i_XL_stage2_512.pt"));
}

// The published layout: the file name gives GPT-XL at 512 px and t2i, the VQ
// file is vq_ds16_t2i.pt, and the T5 encoder is looked for in
// t5-ckpt/flan-t5-xl (the repository's pretrained_models layout) or
// flan-t5-xl; each missing piece is named.
TEST(LlamaGenT2iConfigTest, PublishedNamesAndEveryMissingFileIsNamed) {
  const fs::path dir = fs::temp_directory_path() / ("llamagen_t2i_layout_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(Dir() + "/t2i_tiny.pt", dir / "t2i_XL_stage2_512.pt");
  absl::StatusOr<LlamaGenConfig> c = LoadLlamaGenConfig(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("vq_ds16_t2i.pt is missing"), std::string::npos) << c.status();
  fs::copy_file(Dir() + "/vq_ds16_t2i.pt", dir / "vq_ds16_t2i.pt");
  c = LoadLlamaGenConfig(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("the T5 text encoder is missing"), std::string::npos) << c.status();
  EXPECT_NE(c.status().message().find("t5-ckpt/flan-t5-xl"), std::string::npos) << c.status();
  fs::create_directories(dir / "t5-ckpt");
  fs::copy(Dir() + "/flan-t5-tiny", dir / "t5-ckpt" / "flan-t5-xl");
  fs::remove(dir / "t5-ckpt" / "flan-t5-xl" / "spiece.model");
  c = LoadLlamaGenConfig(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("spiece.model is missing"), std::string::npos) << c.status();
  fs::copy_file(Dir() + "/flan-t5-tiny/spiece.model", dir / "t5-ckpt" / "flan-t5-xl" / "spiece.model");
  c = LoadLlamaGenConfig(dir.string());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->text_conditional);
  EXPECT_EQ(c->gpt_model, "GPT-XL");
  EXPECT_EQ(c->dim, 1280);
  EXPECT_EQ(c->n_layer, 36);
  EXPECT_EQ(c->n_head, 20);
  EXPECT_EQ(c->ffn_hidden, 3584);
  EXPECT_EQ(c->grid(), 32);  // 512 px / 16
  EXPECT_EQ(c->cls_token_num, 120);
  EXPECT_EQ(c->t5_dir, (dir / "t5-ckpt" / "flan-t5-xl").string());
  // The family option t5_dir points elsewhere.
  c = LoadLlamaGenConfig(dir.string(), Dir() + "/flan-t5-tiny");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->t5_dir, Dir() + "/flan-t5-tiny");
  // A c2i and a t2i file side by side: which one is ambiguous.
  fs::copy_file(SourceDir() + "/tests/goldens/tiny/tiny-llamagen-c2i/c2i_tiny.pt", dir / "c2i_B_256.pt");
  c = LoadLlamaGenConfig(dir.string());
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("found c2i_B_256.pt, t2i_XL_stage2_512.pt"), std::string::npos) << c.status();
  fs::remove_all(dir);
}

// Family option t5_dir: taken by a t2i model, refused for a c2i one (it has
// no text encoder), and a key the family does not take is named.
TEST(LlamaGenT2iConfigTest, TheT5DirOptionIsForTextModelsOnly) {
  absl::StatusOr<families::FamilyModel> m = families::LoadFamilyModel(Dir(), {{"t5_dir", Dir() + "/flan-t5-tiny"}});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->num_classes, 0);
  EXPECT_TRUE(m->make_prompt_embedder != nullptr);
  m = families::LoadFamilyModel(SourceDir() + "/tests/goldens/tiny/tiny-llamagen-c2i", {{"t5_dir", "flan-t5-xl"}});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("family option 't5_dir': c2i_tiny.pt is class-conditional"), std::string::npos)
      << m.status();
  m = families::LoadFamilyModel(Dir(), {{"t5dir", "x"}});
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("family option 't5dir'"), std::string::npos) << m.status();
}

// Where T5 runs: unset follows the engine's backend; an explicit "cpu" or
// "cuda" wins over it; anything else names the option.
TEST(LlamaGenT2iConfigTest, TheT5BackendFollowsTheEngineUnlessSet) {
  absl::StatusOr<T5Backend> unset = ParseT5Backend("");
  ASSERT_TRUE(unset.ok()) << unset.status();
  EXPECT_EQ(*unset, T5Backend::kFollowEngine);
  EXPECT_FALSE(T5RunsOnGpu(*unset, /*engine_on_gpu=*/false));
  EXPECT_TRUE(T5RunsOnGpu(*unset, /*engine_on_gpu=*/true));
  absl::StatusOr<T5Backend> cpu = ParseT5Backend("cpu");
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  EXPECT_FALSE(T5RunsOnGpu(*cpu, false));
  EXPECT_FALSE(T5RunsOnGpu(*cpu, true));
  absl::StatusOr<T5Backend> cuda = ParseT5Backend("cuda");
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  EXPECT_TRUE(T5RunsOnGpu(*cuda, false));
  EXPECT_TRUE(T5RunsOnGpu(*cuda, true));
  for (const char* bad : {"CUDA", "gpu", " cpu", "auto"}) {
    absl::StatusOr<T5Backend> b = ParseT5Backend(bad);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(b.status().message().find(
                  absl::StrCat("family option 't5_backend' must be \"cpu\" or \"cuda\", got \"", bad, "\"")),
              std::string::npos)
        << b.status();
  }
  // Unset on a CPU engine: the host encoder, the golden prefix as before.
  absl::StatusOr<families::FamilyModel> m = families::LoadFamilyModel(Dir(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<model::PromptEmbedder> embedder = m->make_prompt_embedder({/*engine_on_gpu=*/false});
  ASSERT_TRUE(embedder.ok()) << embedder.status();
  model::PromptText text;
  text.caption = ReadJson(std::string(kRel) + "/goldens.json")["prompt"].get<std::string>();
  absl::StatusOr<model::PromptEmbeddings> e = (*embedder)(text);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_LE(RelativeError(e->cond.data(), ReadF32(Dir() + "/prefix_cond.f32")), 1e-5);
}

// Family option t5_backend: "cpu" or "cuda" only, for text models only;
// "cpu" serves as before, on a CUDA engine too. ("cuda" itself:
// llamagen_t2i_cuda_test, label gpu.)
TEST(LlamaGenT2iConfigTest, TheT5BackendOptionIsCheckedByName) {
  absl::StatusOr<families::FamilyModel> m = families::LoadFamilyModel(Dir(), {{"t5_backend", "tpu"}});
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("family option 't5_backend' must be \"cpu\" or \"cuda\""), std::string::npos)
      << m.status();
  m = families::LoadFamilyModel(SourceDir() + "/tests/goldens/tiny/tiny-llamagen-c2i", {{"t5_backend", "cuda"}});
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("family option 't5_backend': c2i_tiny.pt is class-conditional"),
            std::string::npos)
      << m.status();
  m = families::LoadFamilyModel(Dir(), {{"t5_backend", "cpu"}});
  ASSERT_TRUE(m.ok()) << m.status();
  absl::StatusOr<model::PromptEmbedder> embedder = m->make_prompt_embedder({/*engine_on_gpu=*/true});
  ASSERT_TRUE(embedder.ok()) << embedder.status();
  const nlohmann::json golden = ReadJson(std::string(kRel) + "/goldens.json");
  model::PromptText text;
  text.caption = golden["prompt"].get<std::string>();
  absl::StatusOr<model::PromptEmbeddings> e = (*embedder)(text);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_LE(RelativeError(e->cond.data(), ReadF32(Dir() + "/prefix_cond.f32")), 1e-5);
}

// The official prefill (120 left-padded slots under the caption mask) and
// decode calls against the CPU backend fed the n real slots' prefix
// embeddings (cond: cap_proj(features); uncond: cap_proj of
// uncond_embedding's last n rows), teacher-forced on the greedy tokens.
TEST(LlamaGenT2iLogitsTest, PrefixEmbeddingsAndDecodeMatchTheOfficialGpt) {
  const nlohmann::json golden = ReadJson(std::string(kRel) + "/goldens.json");
  absl::StatusOr<LlamaGenConfig> config = LoadLlamaGenConfig(Dir());
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<model::ModelSpec> spec = LlamaGenSpec(*config);
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::OpenCheckpointFile(Dir() + "/t2i_tiny.pt");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  absl::StatusOr<std::shared_ptr<const T2iPrompt>> prompt =
      T2iPrompt::Load(config->t5_dir, **ckpt, config->caption_dim, config->dim, config->cls_token_num);
  ASSERT_TRUE(prompt.ok()) << prompt.status();
  absl::StatusOr<PrefixEmbeddings> prefix = (*prompt)->Embed(golden["prompt"].get<std::string>());
  ASSERT_TRUE(prefix.ok()) << prefix.status();
  const int32_t n = prefix->tokens;
  ASSERT_TRUE(model::ValidateTensors(**ckpt, *spec).ok()) << model::ValidateTensors(**ckpt, *spec);
  model::BackendOptions options;
  options.max_prompt_tokens = config->cls_token_num;
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
  auto expected = [&](int32_t step, int32_t side) { return golden_logits.Row(step, side); };

  absl::StatusOr<sparse::ResolvedPolicy> dense = sparse::ResolvePolicy({}, steps);
  ASSERT_TRUE(dense.ok());
  const std::vector<model::RowId> rows = {*kv.AllocateRow(n, *dense), *kv.AllocateRow(n, *dense)};
  const int32_t dim = config->dim;
  std::vector<int32_t> sampled(1, -1);
  std::vector<float> logits(2 * vocab);
  model::StepPlanBuilder plan;
  plan.AddRow(rows[0]);
  plan.AddPromptEmbeddings(prefix->cond, dim, 0, n);
  plan.AddRow(rows[1]);
  plan.AddPromptEmbeddings(prefix->uncond, dim, 0, n);
  plan.AddSampling({});
  ASSERT_TRUE(be.Forward(plan.Plan(), {sampled, logits.data()}).ok()) << be.Forward(plan.Plan(), {sampled, nullptr});
  EXPECT_LE(RelativeError(logits.data(), expected(0, 0)), 1e-4) << "prefill cond";
  EXPECT_LE(RelativeError(logits.data() + vocab, expected(0, 1)), 1e-4) << "prefill uncond";
  for (int32_t t = 0; t + 1 < steps; ++t) {
    plan.Clear();
    for (const model::RowId r : rows) {
      plan.AddRow(r);
      plan.AddQuery(model::QueryKind::kDecode, greedy[t], t);
    }
    plan.AddSampling({});
    ASSERT_TRUE(be.Forward(plan.Plan(), {sampled, logits.data()}).ok());
    for (int32_t side = 0; side < 2; ++side) {
      EXPECT_LE(RelativeError(logits.data() + side * vocab, expected(t + 1, side)), 1e-4)
          << "decode " << t << (side == 0 ? " cond" : " uncond");
    }
  }
  for (model::RowId r : rows) kv.FreeRow(r);
}

std::unique_ptr<model::GenericEngine> TinyEngine(bool share_across_requests = false) {
  return test_util::TinyEngine(Dir(), share_across_requests);
}

engine::GenerationRequest CaptionRequest(const std::string& prompt, int32_t images = 1) {
  engine::GenerationRequest r = GreedyRequest(7.5f);
  r.prompt = prompt;
  r.num_images = images;
  return r;
}

TEST(LlamaGenT2iEngineTest, GreedyTokensAndImageMatchTheOfficialGenerate) {
  const nlohmann::json golden = ReadJson(std::string(kRel) + "/goldens.json");
  const auto greedy = golden["greedy_tokens"].get<std::vector<int32_t>>();
  for (const bool across : {false, true}) {
    std::unique_ptr<model::GenericEngine> e = TinyEngine(across);
    ASSERT_NE(e, nullptr);
    const engine::ModelInfo& info = e->info();
    EXPECT_EQ(info.family, "llamagen");
    EXPECT_EQ(info.num_classes, 0);
    EXPECT_EQ(info.image_size, 10);
    EXPECT_EQ(info.image_tokens, 25);
    EXPECT_EQ(info.max_prompt_tokens, 120);  // the caption slots
    EXPECT_EQ(info.default_sampling.cfg_weight, 7.5f);
    EXPECT_EQ(info.default_sampling.top_k, 64);  // 1000, capped by the tiny codebook
    // Two images of one request (the second reads the first's prompt KV) and a second request.
    absl::StatusOr<engine::PreparedRequest> p = e->Prepare(CaptionRequest(golden["prompt"].get<std::string>(), 2));
    ASSERT_TRUE(p.ok()) << p.status();
    const int32_t n = golden["tokens"].get<int32_t>();
    ASSERT_EQ(p->cond_ids.size(), size_t(n));
    ASSERT_EQ(p->uncond_ids.size(), size_t(n));
    EXPECT_LE(RelativeError(p->cond_embeddings.data(), ReadF32(Dir() + "/prefix_cond.f32")), 1e-5);
    EXPECT_LE(RelativeError(p->uncond_embeddings.data(), ReadF32(Dir() + "/prefix_uncond.f32")), 1e-5);
    absl::StatusOr<engine::GroupId> id = e->Add(*p);
    ASSERT_TRUE(id.ok()) << id.status();
    absl::StatusOr<engine::GroupId> other = e->Add(*e->Prepare(CaptionRequest(golden["prompt"].get<std::string>())));
    ASSERT_TRUE(other.ok()) << other.status();
    for (int32_t step = 0; step <= info.image_tokens; ++step) ASSERT_TRUE(e->Step().ok());
    for (const engine::GroupId g : {*id, *other}) {
      absl::StatusOr<engine::GroupState> s = e->State(g);
      ASSERT_TRUE(s.ok() && s->finished);
      for (const std::vector<int32_t>& tokens : s->tokens) EXPECT_EQ(tokens, greedy) << "across " << across;
    }
    absl::StatusOr<std::vector<engine::RgbImage>> images = e->DecodeImages({greedy});
    ASSERT_TRUE(images.ok()) << images.status();
    ASSERT_EQ(images->size(), 1u);
    EXPECT_EQ((*images)[0].width, 10);
    EXPECT_EQ((*images)[0].height, 10);
    ASSERT_NO_FATAL_FAILURE(ExpectImageMatchesRgb8((*images)[0], Dir() + "/rgb8"));
    e->Remove(*id);
    e->Remove(*other);
  }
}

TEST(LlamaGenT2iEngineTest, AClassIdOrANegativePromptIsRefusedNamingTheField) {
  std::unique_ptr<model::GenericEngine> e = TinyEngine();
  ASSERT_NE(e, nullptr);
  engine::GenerationRequest with_class = CaptionRequest("a cat");
  with_class.class_id = 3;
  absl::StatusOr<engine::PreparedRequest> p = e->Prepare(with_class);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("class_id: this model (llamagen) is text-conditional"), std::string::npos)
      << p.status();
  engine::GenerationRequest negative = CaptionRequest("a cat");
  negative.negative_prompt = "a dog";
  p = e->Prepare(negative);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("negative_prompt:"), std::string::npos) << p.status();
}

// Every policy on the 5 x 5 grid behind a 58-slot caption prefix.
TEST(LlamaGenT2iEngineTest, EveryPolicyRunsOnTheGrid) {
  std::unique_ptr<model::GenericEngine> e = TinyEngine();
  ASSERT_NE(e, nullptr);
  for (const sparse::PolicyKind kind : sparse::kAllPolicyKinds) {
    if (kind == sparse::PolicyKind::kSsd) continue;  // needs ssd_heads.json (none for the tiny model)
    engine::GenerationRequest r = CaptionRequest("a red car parked in front of a yellow brick wall", 2);
    r.sampling.temperature = 1.0f;
    r.policy.kind = kind;
    r.policy.sparsity = kind == sparse::PolicyKind::kDense ? 0.0 : 0.6;
    absl::StatusOr<engine::PreparedRequest> p = e->Prepare(r);
    ASSERT_TRUE(p.ok()) << sparse::PolicyName(kind) << ": " << p.status();
    absl::StatusOr<engine::GroupId> id = e->Add(*p);
    ASSERT_TRUE(id.ok()) << id.status();
    for (int32_t step = 0; step <= e->info().image_tokens; ++step) ASSERT_TRUE(e->Step().ok());
    absl::StatusOr<engine::GroupState> s = e->State(*id);
    ASSERT_TRUE(s.ok() && s->finished) << sparse::PolicyName(kind);
    for (const std::vector<int32_t>& image : s->tokens) {
      ASSERT_EQ(image.size(), 25u);
      for (int32_t v : image) EXPECT_TRUE(v >= 0 && v < 64) << v;
    }
    e->Remove(*id);
  }
}

}  // namespace
}  // namespace argen::llamagen
