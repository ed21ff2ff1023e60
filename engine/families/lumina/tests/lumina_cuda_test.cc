// The Lumina family on the CUDA backend through the shared decoder stack,
// against the CPU backend (the f32 reference, itself checked against HF
// Chameleon: lumina_logits_test.cc), with the shipped small model
// (models/argen-lumina-scenes-v1): a CFG pair of unequal rows (prompt +
// header, header alone), teacher-forced through two image rows with the
// forced new line between them; logits over the image-token range within the
// bf16 tolerance every step, greedy tokens agreeing; then the whole
// generation loop on the CUDA engine, dense and diagonal 95%, with row breaks
// where they belong and exact KV accounting. Sizes per request: with a
// config copy allowing 128 x 128 (the default) and 128 x 64, a CFG pair of
// each size in ONE decode batch (each its own L_dec and forced new lines)
// against the CPU backend as above, and the CUDA engine running both sizes
// in one batch, decoding both images in one call (128 x 128 on the GPU
// VQGAN, 128 x 64 on the CPU one). Needs a GPU (label gpu).
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/weights_file.h"
#include "engine/families/lumina/lumina_family.h"
#include "engine/families/lumina/lumina_vq16.h"
#include "engine/families/lumina/tests/test_util.h"
#include "engine/kv/kv_manager.h"
#include "engine/model/backend_registry.h"
#include "engine/model/create_engine.h"
#include "engine/model/weight_source.h"
#include "engine/request_rules.h"
#include "engine/sparse/policy_params.h"
#include "engine/vq_cuda/cuda_vq_decoder.h"
#include "engine/vqgan/vqgan_decoder.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/lumina_sizes.h"

namespace argen::lumina {
namespace {

using testing::RelativeError;
using testing::SourceDir;

constexpr double kTolerance = 3e-2;  // bf16 weights and KV
constexpr int32_t kNewLine = 1035;

std::string ModelDir() { return SourceDir() + "/models/argen-lumina-scenes-v1"; }

// The small model's files, its config allowing 128 x 128 (the default) and 128 x 64.
std::string TwoSizeDir() {
  static test_support::RemovedDir temp{std::filesystem::temp_directory_path() /
                                       ("lumina_cuda_sizes_" + std::to_string(::getpid()))};
  static const std::string dir = test_support::LuminaModelWithSizes(temp.path, {{128, 128}, {128, 64}}).string();
  return dir;
}

TEST(LuminaCudaTest, LogitsAndGreedyTokensMatchTheCpuBackend) {
  absl::StatusOr<families::FamilyModel> family = LoadLumina(ModelDir(), {});
  ASSERT_TRUE(family.ok()) << family.status();
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> opened = checkpoint::Checkpoint::Open(ModelDir());
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::shared_ptr<const checkpoint::Checkpoint> ckpt(std::move(*opened));
  model::BackendOptions options;
  options.max_batch_rows = 8;
  options.max_prompt_tokens = 256;
  options.kv_budget_bytes = int64_t{256} << 20;
  absl::StatusOr<std::unique_ptr<model::Backend>> cpu =
      model::CreateCpuBackend(family->spec, model::CheckpointWeights(ckpt), options);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  absl::StatusOr<std::unique_ptr<model::Backend>> cuda =
      model::CreateCudaBackend(family->spec, model::CheckpointWeights(ckpt), options);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  absl::StatusOr<model::PromptEncoder> encoder = family->make_prompt();
  ASSERT_TRUE(encoder.ok()) << encoder.status();
  auto ids = (*encoder)({"a red circle above a blue square", ""});
  ASSERT_TRUE(ids.ok()) << ids.status();
  const std::vector<int32_t>& cond = ids->first;
  const std::vector<int32_t>& uncond = ids->second;
  ASSERT_NE(cond.size(), uncond.size());

  const int32_t vocab = family->spec.logits();
  const int32_t steps = 2 * 25;  // two rows of 24 codes and the new line between them
  absl::StatusOr<sparse::ResolvedPolicy> dense = sparse::ResolvePolicy({}, family->image_tokens);
  ASSERT_TRUE(dense.ok());
  model::Backend* be[2] = {cpu->get(), cuda->get()};
  kv::KvManager kv_cpu(*be[0]), kv_cuda(*be[1]);
  kv::KvManager* kv[2] = {&kv_cpu, &kv_cuda};
  std::vector<model::RowId> rows[2];
  for (int b = 0; b < 2; ++b) {
    EXPECT_TRUE(
        kv[b]->CanPlace(kv::PlacementSizes(*be[b], static_cast<int32_t>(cond.size()),
                                           static_cast<int32_t>(uncond.size()), *dense, 1, kv::Sharing::kNone)));
    rows[b] = {*kv[b]->AllocateRow(static_cast<int32_t>(cond.size()), *dense),
               *kv[b]->AllocateRow(static_cast<int32_t>(uncond.size()), *dense)};
    EXPECT_EQ(kv[b]->BytesInUse(), be[b]->RowBytes(static_cast<int32_t>(cond.size()), *dense) +
                                       be[b]->RowBytes(static_cast<int32_t>(uncond.size()), *dense));
  }
  std::vector<int32_t> tokens = cond;
  tokens.insert(tokens.end(), uncond.begin(), uncond.end());
  const std::vector<int32_t> offsets = {0, static_cast<int32_t>(cond.size()), static_cast<int32_t>(tokens.size())};
  model::SamplingSpec greedy;
  greedy.temperature = 0.0f;
  greedy.cfg_weight = kDefaultCfgWeight;
  const std::vector<model::SamplingSpec> sampling = {greedy};
  std::vector<float> logits[2] = {std::vector<float>(2 * vocab), std::vector<float>(2 * vocab)};
  std::vector<int32_t> sampled[2] = {{-1}, {-1}};
  for (int b = 0; b < 2; ++b) {
    ASSERT_TRUE(be[b]->Prefill({rows[b], offsets, tokens, sampling}, {sampled[b], logits[b].data()}).ok());
  }
  int agree = 0;
  for (int32_t t = 0; t <= steps; ++t) {
    for (int r = 0; r < 2; ++r) {
      const std::vector<float> want(logits[0].begin() + r * vocab, logits[0].begin() + (r + 1) * vocab);
      EXPECT_LE(RelativeError(logits[1].data() + r * vocab, want), kTolerance) << "step " << t << " row " << r;
    }
    agree += sampled[0][0] == sampled[1][0] ? 1 : 0;
    if (t == steps) break;
    // Both fed the CPU's choice, or the forced new line at a row end.
    const int32_t input =
        family->forced_tokens[t] >= 0 ? family->forced_tokens[t] : family->spec.input.sampled_offset + sampled[0][0];
    const std::vector<int32_t> in = {input}, step = {t};
    for (int b = 0; b < 2; ++b) {
      ASSERT_TRUE(be[b]->Decode({rows[b], in, step, sampling}, {sampled[b], logits[b].data()}).ok()) << t;
    }
  }
  EXPECT_GE(agree, (steps + 1) * 9 / 10) << "greedy tokens agreeing of " << steps + 1;
  for (int b = 0; b < 2; ++b) {
    for (model::RowId r : rows[b]) kv[b]->FreeRow(r);
    EXPECT_EQ(kv[b]->BytesInUse(), 0);
  }
}

TEST(LuminaCudaTest, GenerationLoopOnTheCudaEngine) {
  engine::EngineOptions options;
  options.model_dir = ModelDir();
  options.backend = "cuda";
  options.kv_budget_bytes = int64_t{512} << 20;
  absl::StatusOr<std::unique_ptr<model::GenericEngine>> e = model::CreateGenericEngine(options);
  ASSERT_TRUE(e.ok()) << e.status();
  const int32_t l_dec = (*e)->info().image_tokens;
  ASSERT_EQ(l_dec, 24 * 25 - 1);
  for (sparse::PolicyKind kind : {sparse::PolicyKind::kDense, sparse::PolicyKind::kDiagonal}) {
    engine::GenerationRequest r;
    r.prompt = "a red circle";
    r.num_images = 2;
    r.sampling.cfg_weight = kDefaultCfgWeight;
    r.sampling.seed = 3;
    r.policy.kind = kind;
    r.policy.sparsity = kind == sparse::PolicyKind::kDense ? 0.0 : 0.95;
    absl::StatusOr<engine::PreparedRequest> p = (*e)->Prepare(r);
    ASSERT_TRUE(p.ok()) << p.status();
    if (kind == sparse::PolicyKind::kDiagonal)
      EXPECT_EQ(p->policy.n_recent, 67);  // the family's N_r: 8/3 of 25-token rows
    absl::StatusOr<engine::GroupId> id = (*e)->Add(*p);
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_EQ((*e)->KvBytesInUse(), p->kv_bytes);
    for (int32_t s = 0; s < l_dec; ++s) ASSERT_TRUE((*e)->Step().ok());
    absl::StatusOr<engine::GroupState> st = (*e)->State(*id);
    ASSERT_TRUE(st.ok() && st->finished);
    EXPECT_EQ((*e)->KvBytesInUse(), 0);
    for (const std::vector<int32_t>& tokens : st->tokens) {
      ASSERT_EQ(static_cast<int32_t>(tokens.size()), l_dec);
      for (int32_t t = 0; t < l_dec; ++t) {
        if (t % 25 == 24) {
          EXPECT_EQ(tokens[t], kNewLine) << t;
        } else {
          EXPECT_GE(tokens[t], 4);
          EXPECT_LT(tokens[t], 4 + 1024);
        }
      }
    }
    absl::StatusOr<std::vector<engine::RgbImage>> images = (*e)->DecodeImages(st->tokens);
    ASSERT_TRUE(images.ok()) << images.status();
    EXPECT_EQ((*images)[1].width, 384);
    (*e)->Remove(*id);
  }
}

// A CFG pair of each size (128 x 128: L_dec 71; 128 x 64: 35) in one
// prefill and then one decode batch, teacher-forced with the CPU's greedy
// choices (or each size's own forced new line): logits within the bf16
// tolerance for every row at every step, greedy tokens agreeing; the shorter
// pair leaves the batch at its own end.
TEST(LuminaCudaTest, TwoSizesInOneDecodeBatchMatchTheCpuBackend) {
  absl::StatusOr<families::FamilyModel> family = LoadLumina(TwoSizeDir(), {});
  ASSERT_TRUE(family.ok()) << family.status();
  ASSERT_EQ(family->image_layouts.size(), 2u);
  absl::StatusOr<model::ImageRecipeMaker> make_recipe = family->make_recipes();
  ASSERT_TRUE(make_recipe.ok()) << make_recipe.status();
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> opened = checkpoint::Checkpoint::Open(TwoSizeDir());
  ASSERT_TRUE(opened.ok()) << opened.status();
  std::shared_ptr<const checkpoint::Checkpoint> ckpt(std::move(*opened));
  model::BackendOptions options;
  options.max_batch_rows = 8;
  options.max_prompt_tokens = 256;
  options.kv_budget_bytes = int64_t{256} << 20;
  options.decode_tokens = 71;  // the longest size's L_dec
  absl::StatusOr<std::unique_ptr<model::Backend>> cpu =
      model::CreateCpuBackend(family->spec, model::CheckpointWeights(ckpt), options);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  absl::StatusOr<std::unique_ptr<model::Backend>> cuda =
      model::CreateCudaBackend(family->spec, model::CheckpointWeights(ckpt), options);
  ASSERT_TRUE(cuda.ok()) << cuda.status();
  model::Backend* be[2] = {cpu->get(), cuda->get()};
  kv::KvManager kv_cpu(*be[0]), kv_cuda(*be[1]);
  kv::KvManager* kv[2] = {&kv_cpu, &kv_cuda};

  struct Pair {
    model::ImageRecipe recipe;
    sparse::ResolvedPolicy policy;
    std::vector<int32_t> cond, uncond;
    std::vector<model::RowId> rows[2];  // cpu, cuda
  };
  std::vector<Pair> pairs;
  const char* captions[2] = {"a red circle above a blue square", "a green triangle"};
  for (size_t i = 0; i < 2; ++i) {
    Pair p;
    absl::StatusOr<model::ImageRecipe> recipe = (*make_recipe)(family->image_layouts[i]);
    ASSERT_TRUE(recipe.ok()) << recipe.status();
    p.recipe = *std::move(recipe);
    absl::StatusOr<sparse::ResolvedPolicy> dense = sparse::ResolvePolicy({}, engine::PolicyGrid(p.recipe.layout));
    ASSERT_TRUE(dense.ok()) << dense.status();
    p.policy = *dense;
    auto ids = p.recipe.encoder({captions[i], ""});
    ASSERT_TRUE(ids.ok()) << ids.status();
    p.cond = ids->first;
    p.uncond = ids->second;
    for (int b = 0; b < 2; ++b) {
      p.rows[b] = {*kv[b]->AllocateRow(static_cast<int32_t>(p.cond.size()), p.policy),
                   *kv[b]->AllocateRow(static_cast<int32_t>(p.uncond.size()), p.policy)};
    }
    pairs.push_back(std::move(p));
  }
  ASSERT_EQ(pairs[0].policy.l_dec, 71);
  ASSERT_EQ(pairs[1].policy.l_dec, 35);
  for (int b = 0; b < 2; ++b) {
    int64_t want = 0;
    for (const Pair& p : pairs) {
      want += be[b]->RowBytes(static_cast<int32_t>(p.cond.size()), p.policy) +
              be[b]->RowBytes(static_cast<int32_t>(p.uncond.size()), p.policy);
    }
    EXPECT_EQ(kv[b]->BytesInUse(), want) << b;
  }

  const int32_t vocab = family->spec.logits();
  model::SamplingSpec greedy;
  greedy.temperature = 0.0f;
  greedy.cfg_weight = kDefaultCfgWeight;
  // Prefill both pairs in one call.
  std::vector<model::RowId> rows[2];
  std::vector<int32_t> tokens, offsets = {0};
  for (const Pair& p : pairs) {
    for (const std::vector<int32_t>* ids : {&p.cond, &p.uncond}) {
      tokens.insert(tokens.end(), ids->begin(), ids->end());
      offsets.push_back(static_cast<int32_t>(tokens.size()));
    }
  }
  for (int b = 0; b < 2; ++b) {
    for (const Pair& p : pairs) rows[b].insert(rows[b].end(), p.rows[b].begin(), p.rows[b].end());
  }
  std::vector<model::SamplingSpec> sampling = {greedy, greedy};
  std::vector<float> logits[2] = {std::vector<float>(4 * vocab), std::vector<float>(4 * vocab)};
  std::vector<int32_t> sampled[2] = {{-1, -1}, {-1, -1}};
  for (int b = 0; b < 2; ++b) {
    ASSERT_TRUE(be[b]->Prefill({rows[b], offsets, tokens, sampling}, {sampled[b], logits[b].data()}).ok());
  }
  // active[k]: which pair is k-th in the batch now.
  std::vector<size_t> active = {0, 1};
  int agree = 0, compared = 0;
  for (int32_t t = 0;; ++t) {
    for (size_t k = 0; k < active.size(); ++k) {
      for (size_t r = 2 * k; r < 2 * k + 2; ++r) {
        const std::vector<float> want(logits[0].begin() + r * vocab, logits[0].begin() + (r + 1) * vocab);
        EXPECT_LE(RelativeError(logits[1].data() + r * vocab, want), kTolerance)
            << "step " << t << " pair " << active[k] << " row " << r;
      }
      agree += sampled[0][k] == sampled[1][k] ? 1 : 0;
      ++compared;
    }
    // The pairs that have more tokens to make: token t + 1 comes from step t.
    std::vector<size_t> next;
    std::vector<int32_t> in, steps;
    std::vector<model::RowId> next_rows[2];
    for (size_t k = 0; k < active.size(); ++k) {
      const Pair& p = pairs[active[k]];
      if (t + 1 >= p.policy.l_dec) continue;
      const int32_t forced = p.recipe.forced_tokens[t];
      in.push_back(forced >= 0 ? forced : family->spec.input.sampled_offset + sampled[0][k]);
      steps.push_back(t);
      next.push_back(active[k]);
      for (int b = 0; b < 2; ++b) next_rows[b].insert(next_rows[b].end(), p.rows[b].begin(), p.rows[b].end());
    }
    if (next.empty()) break;
    if (next.size() < active.size()) EXPECT_EQ(t + 1, 35);  // the 128 x 64 pair ends first, at its own L_dec
    active = next;
    sampling.assign(active.size(), greedy);
    for (int b = 0; b < 2; ++b) {
      sampled[b].assign(active.size(), -1);
      ASSERT_TRUE(be[b]->Decode({next_rows[b], in, steps, sampling}, {sampled[b], logits[b].data()}).ok()) << t;
    }
  }
  EXPECT_EQ(compared, 71 + 35);
  EXPECT_GE(agree, compared * 9 / 10) << "greedy tokens agreeing of " << compared;
  for (int b = 0; b < 2; ++b) {
    for (const Pair& p : pairs) {
      for (model::RowId r : p.rows[b]) kv[b]->FreeRow(r);
    }
    EXPECT_EQ(kv[b]->BytesInUse(), 0);
  }
}

// The CUDA engine with both sizes in one batch: each image's row breaks at
// its own width, KV exact, and the two images decoded in one call at their
// own sizes: 128 x 64 on the CPU VQGAN (bytes equal to the CPU engine's),
// 128 x 128 on the GPU one (bf16, >= 30 dB against the CPU engine's).
TEST(LuminaCudaTest, CudaEngineRunsAndDecodesTwoSizesInOneBatch) {
  engine::EngineOptions options;
  options.model_dir = TwoSizeDir();
  options.backend = "cuda";
  options.kv_budget_bytes = int64_t{512} << 20;
  absl::StatusOr<std::unique_ptr<model::GenericEngine>> e = model::CreateGenericEngine(options);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ((*e)->info().image_tokens, 71);
  engine::GenerationRequest square;
  square.prompt = "a red circle";
  square.sampling.cfg_weight = kDefaultCfgWeight;
  square.sampling.seed = 3;
  engine::GenerationRequest wide = square;
  wide.prompt = "a blue square";
  wide.width = 128;
  wide.height = 64;
  absl::StatusOr<engine::PreparedRequest> ps = (*e)->Prepare(square);
  absl::StatusOr<engine::PreparedRequest> pw = (*e)->Prepare(wide);
  ASSERT_TRUE(ps.ok() && pw.ok()) << ps.status() << pw.status();
  EXPECT_EQ(pw->policy.l_dec, 35);
  absl::StatusOr<engine::GroupId> is = (*e)->Add(*ps);
  absl::StatusOr<engine::GroupId> iw = (*e)->Add(*pw);
  ASSERT_TRUE(is.ok() && iw.ok());
  EXPECT_EQ((*e)->KvBytesInUse(), ps->kv_bytes + pw->kv_bytes);
  for (int32_t s = 0; s < 35; ++s) {
    absl::StatusOr<engine::StepReport> rep = (*e)->Step();
    ASSERT_TRUE(rep.ok()) << rep.status();
    if (s > 0) EXPECT_EQ(rep->rows_decoded, 4) << s;  // both pairs in one decode batch
  }
  EXPECT_EQ((*e)->KvBytesInUse(), ps->kv_bytes);  // the wide one finished and freed
  for (int32_t s = 35; s < 71; ++s) ASSERT_TRUE((*e)->Step().ok());
  EXPECT_EQ((*e)->KvBytesInUse(), 0);
  absl::StatusOr<engine::GroupState> ss = (*e)->State(*is);
  absl::StatusOr<engine::GroupState> sw = (*e)->State(*iw);
  ASSERT_TRUE(ss.ok() && sw.ok() && ss->finished && sw->finished);
  for (auto [state, w] : {std::pair{&*ss, 8}, std::pair{&*sw, 8}}) {
    const std::vector<int32_t>& tokens = state->tokens[0];
    ASSERT_EQ(static_cast<int32_t>(tokens.size()), state->tokens_total);
    for (int32_t t = 0; t < state->tokens_total; ++t) {
      if (t % (w + 1) == w) {
        EXPECT_EQ(tokens[t], kNewLine) << t;
      } else {
        EXPECT_GE(tokens[t], 4);
        EXPECT_LT(tokens[t], 4 + 1024);
      }
    }
  }
  absl::StatusOr<std::vector<engine::RgbImage>> images = (*e)->DecodeImages({sw->tokens[0], ss->tokens[0]});
  ASSERT_TRUE(images.ok()) << images.status();
  ASSERT_EQ(images->size(), 2u);
  EXPECT_EQ((*images)[0].width, 128);
  EXPECT_EQ((*images)[0].height, 64);
  EXPECT_EQ((*images)[1].width, 128);
  EXPECT_EQ((*images)[1].height, 128);

  engine::EngineOptions cpu_options = options;
  cpu_options.backend = "cpu";
  absl::StatusOr<std::unique_ptr<model::GenericEngine>> cpu = model::CreateGenericEngine(cpu_options);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  absl::StatusOr<std::vector<engine::RgbImage>> want = (*cpu)->DecodeImages({sw->tokens[0], ss->tokens[0]});
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_EQ((*images)[0].rgb, (*want)[0].rgb);  // the same CPU VQGAN
  ASSERT_EQ((*images)[1].rgb.size(), (*want)[1].rgb.size());
  double se = 0;
  for (size_t p = 0; p < (*want)[1].rgb.size(); ++p) {
    const double d = static_cast<double>((*images)[1].rgb[p]) - static_cast<double>((*want)[1].rgb[p]);
    se += d * d;
  }
  const double mse = se / static_cast<double>((*want)[1].rgb.size());
  const double psnr = mse == 0 ? 99.0 : 10.0 * std::log10(255.0 * 255.0 / mse);
  EXPECT_GE(psnr, 30.0);
  std::printf("two sizes: 128x128 on the GPU VQGAN vs CPU: PSNR %.1f dB\n", psnr);
  (*e)->Remove(*is);
  (*e)->Remove(*iw);
}

// The Chameleon VQGAN on the GPU (engine/vq_cuda through lumina_vq16.h)
// against the CPU VQGAN decoder, 4 random grids of the small model's 24 x 24:
// fp32 floats within 1e-4 of max(1, |cpu|), bf16 images at >= 35 dB PSNR.
TEST(LuminaCudaTest, GpuVqganDecoderMatchesTheCpuOne) {
  const std::string dir = ModelDir() + "/tokenizer";
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
  absl::StatusOr<std::unique_ptr<vqgan::VqganDecoder>> cpu =
      vqgan::VqganDecoder::Create(*std::move(weights), *config, {kGrid * kGrid, kGrid});
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  std::mt19937 rng(9);
  std::uniform_int_distribution<int32_t> code(0, config->n_embed - 1);
  std::vector<std::vector<int32_t>> grids(4, std::vector<int32_t>(kGrid * kGrid));
  for (auto& g : grids)
    for (int32_t& c : g) c = code(rng);
  std::vector<std::vector<float>> want(grids.size());
  std::vector<engine::RgbImage> want_rgb;
  for (size_t i = 0; i < grids.size(); ++i) {
    ASSERT_TRUE((*cpu)->DecodeToFloat({kGrid, kGrid, grids[i]}, &want[i]).ok());
    want_rgb.push_back((*(*cpu)->Decode({{kGrid, kGrid, grids[i]}}))[0]);
  }
  for (vq::VqPrecision precision : {vq::VqPrecision::kFp32, vq::VqPrecision::kBf16}) {
    vq::CudaVqOptions options;
    options.precision = precision;
    options.fallback_to_fp32 = false;
    options.max_images_per_chunk = 4;
    absl::StatusOr<std::unique_ptr<vq::CudaVqDecoder>> gpu =
        vq::CudaVqDecoder::Create(vq16->first, vq16->second, options);
    ASSERT_TRUE(gpu.ok()) << vq::VqPrecisionName(precision) << ": " << gpu.status();
    if (precision == vq::VqPrecision::kFp32) {
      std::vector<std::vector<float>> got;
      ASSERT_TRUE((*gpu)->DecodeToFloatBatch(grids, &got).ok());
      double max_err = 0;
      for (size_t i = 0; i < grids.size(); ++i) {
        ASSERT_EQ(got[i].size(), want[i].size());
        for (size_t p = 0; p < want[i].size(); ++p) {
          max_err = std::max(max_err, std::abs(got[i][p] - want[i][p]) / std::max(1.0, std::abs(double{want[i][p]})));
        }
      }
      EXPECT_LE(max_err, 1e-4) << "fp32";
    } else {
      absl::StatusOr<std::vector<engine::RgbImage>> got = (*gpu)->Decode(grids);
      ASSERT_TRUE(got.ok()) << got.status();
      double se = 0;
      size_t n = 0;
      for (size_t i = 0; i < grids.size(); ++i) {
        ASSERT_EQ((*got)[i].rgb.size(), want_rgb[i].rgb.size());
        for (size_t p = 0; p < want_rgb[i].rgb.size(); ++p, ++n) {
          const double d = double{(*got)[i].rgb[p]} - want_rgb[i].rgb[p];
          se += d * d;
        }
      }
      const double mse = se / static_cast<double>(n);
      const double psnr = mse == 0 ? 99.0 : 10.0 * std::log10(255.0 * 255.0 / mse);
      EXPECT_GE(psnr, 35.0) << "bf16";
      std::printf("bf16 VQGAN decode vs CPU: PSNR %.1f dB\n", psnr);
    }
  }
}

}  // namespace
}  // namespace argen::lumina
