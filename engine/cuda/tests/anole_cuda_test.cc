// Anole (engine/families/anole) on the CUDA backend against the CPU backend
// (the f32 reference, itself checked against transformers' Chameleon:
// anole_logits_test.cc), in both published layouts (the -hf conversion and
// Meta's consolidated.pth through its q/k permutation and one q/k-norm row),
// on tests/goldens/tiny/tiny-anole-cuda-* (the tiny random Anole at head_dim
// 16: the committed tiny-anole-* have head_dim 8, which the CUDA attention
// kernels do not take; tools/goldens/make_anole_tiny_cuda.py). Needs a GPU
// (label gpu). Every measured error prints as "measured ...".
//
//  * Prompt logits: transformers' CFG pair (prefill, then five KV-decode
//    steps) on both backends; CUDA within kTolerance (L2-relative per row over
//    the image tokens: bf16 activations and KV, the bound of lumina_cuda_test)
//    of the CPU and of transformers. Then a whole 1,024-token image
//    teacher-forced with the CPU's greedy choices (32 x 32, no row breaks):
//    every step within kTolerance, and where the greedy choices differ the
//    CPU's guided logits of the two tokens are within GreedyGapBound.
//  * The engines: a greedy image (dense and diagonal 95%: N_r, the family's
//    2 2/3 rows of 32) and a sampled one (Anole's temperature 0.7, top-p 0.9,
//    cfg 3; seed fixed) on the CUDA engine and the CPU engine. Both draw from
//    the same counter-based uniforms (kernels/sampling_rng.h), so tokens
//    differ only where bf16 moves a choice; once one differs the rest follow
//    other prompts, so the engines' token lists are compared for the print
//    only and the assertion is a replay: the CUDA engine's 1,024 tokens fed
//    to the CPU backend (same policy, seed and draws). Greedy dense: every
//    choice that differs is within GreedyGapBound on the CPU's logits. Sampled,
//    and greedy diagonal (whose argmin skip set follows bf16 near-ties, so the
//    replay attends other keys after one): at most kMaxSampledReplayShare of
//    the choices differ. The tiny random model
//    is far flatter than a trained one (64 codes, near ties everywhere): in a
//    transformers simulation of this model (a 1e-2 relative logit error per
//    row, the same uniforms), 66 of 1,024 greedy and 208 of 1,024 top-p
//    choices moved, so counts alone cannot be tight; a broken device path
//    (weights, layout, RNG) moves most of them. The CPU engine's greedy dense
//    tokens are transformers' greedy loop's (goldens.json).
//  * The CUDA engine's image (GPU VQGAN, bf16) against the CPU engine's image
//    of the same tokens (CPU VQGAN): >= 30 dB PSNR (lumina_cuda_test's bound).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/families/anole/anole_family.h"
#include "engine/kv/kv_manager.h"
#include "engine/model/backend_registry.h"
#include "engine/model/create_engine.h"
#include "engine/model/weight_source.h"
#include "engine/sparse/policy_params.h"
#include "nlohmann/json.hpp"
#include "tests/support/golden_files.h"

namespace argen::anole {
namespace {

using test_support::ReadF32;
using test_support::ReadJson;
using test_support::RelativeError;
using test_support::SourceDir;

constexpr double kTolerance = 3e-2;             // L2-relative per row: bf16 weights and KV
constexpr double kMaxSampledReplayShare = 0.4;  // sampled choices that may move (see above)
constexpr double kMinGreedyAgreement = 0.75;    // greedy choices that must stay (the gap bound is the real check)
constexpr double kMinPsnrDb = 30.0;             // the GPU VQGAN (bf16) against the CPU one (fp32)
const char kGoldens[] = "tests/goldens/tiny/tiny-anole-cuda-hf";

// The largest guided-logit gap a bf16 error within kTolerance can overturn:
// guided = u + cfg (c - u) moves by e = cfg e_c - (cfg - 1) e_u with
// |e_c| <= kTolerance |c|, |e_u| <= kTolerance |u| (L2), and two entries of e
// differ by at most 2 |e|_inf <= 2 |e|_2.
double GreedyGapBound(const float* c, const float* u, int32_t n, float cfg) {
  double cc = 0, uu = 0;
  for (int32_t i = 0; i < n; ++i) {
    cc += double{c[i]} * c[i];
    uu += double{u[i]} * u[i];
  }
  return 2 * kTolerance * (cfg * std::sqrt(cc) + std::abs(cfg - 1) * std::sqrt(uu));
}

// The CPU's guided logit of its own choice minus that of `other` (>= 0 for greedy).
double GuidedGap(const float* c, const float* u, float cfg, int32_t chosen, int32_t other) {
  auto guided = [&](int32_t v) { return double{u[v]} + cfg * (double{c[v]} - u[v]); };
  return guided(chosen) - guided(other);
}

struct Layout {
  std::string dir;
  families::FamilyOptions options;
};

// Both layouts read the tokenizer and the VQGAN of tiny-anole-meta (the same vocabulary).
Layout LayoutOf(const std::string& which) {
  const std::string name = which == "hf" ? "tiny-anole-cuda-hf" : "tiny-anole-cuda-meta";
  return {SourceDir() + "/tests/goldens/tiny/" + name, {{"vqgan_dir", "../tiny-anole-meta/tokenizer"}}};
}

struct Backends {
  families::FamilyModel family;
  std::unique_ptr<model::Backend> cpu, cuda;
};

// The family (LoadAnole) and its weights on both backends.
std::unique_ptr<Backends> MakeBackends(const Layout& layout) {
  absl::StatusOr<families::FamilyModel> family = LoadAnole(layout.dir, layout.options);
  EXPECT_TRUE(family.ok()) << family.status();
  if (!family.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> opened =
      family->open_checkpoint ? family->open_checkpoint() : checkpoint::Checkpoint::Open(layout.dir);
  EXPECT_TRUE(opened.ok()) << opened.status();
  if (!opened.ok()) return nullptr;
  std::shared_ptr<const checkpoint::Checkpoint> ckpt(std::move(*opened));
  model::BackendOptions options;
  options.max_batch_rows = 8;
  options.max_prompt_tokens = 64;
  options.kv_budget_bytes = int64_t{256} << 20;
  options.decode_tokens = family->image_tokens;
  auto out = std::make_unique<Backends>();
  absl::StatusOr<std::unique_ptr<model::Backend>> cpu =
      model::CreateCpuBackend(family->spec, model::CheckpointWeights(ckpt), options);
  EXPECT_TRUE(cpu.ok()) << cpu.status();
  absl::StatusOr<std::unique_ptr<model::Backend>> cuda =
      model::CreateCudaBackend(family->spec, model::CheckpointWeights(ckpt), options);
  EXPECT_TRUE(cuda.ok()) << cuda.status();
  if (!cpu.ok() || !cuda.ok()) return nullptr;
  out->family = *std::move(family);
  out->cpu = *std::move(cpu);
  out->cuda = *std::move(cuda);
  return out;
}

class AnoleCudaTest : public ::testing::TestWithParam<std::string> {};

TEST_P(AnoleCudaTest, PromptLogitsMatchTheCpuBackendAndTransformers) {
  std::unique_ptr<Backends> b = MakeBackends(LayoutOf(GetParam()));
  ASSERT_NE(b, nullptr);
  const nlohmann::json golden = ReadJson(std::string(kGoldens) + "/goldens.json");
  const int32_t first = golden["image_token_ids"][0].get<int32_t>();
  const int32_t count = b->family.spec.logits();
  ASSERT_EQ(b->family.spec.input.sampled_offset, first);
  const int32_t vocab = golden["vocab_size"].get<int32_t>();
  const std::vector<float> all = ReadF32(SourceDir() + "/" + kGoldens + "/" + golden["logits_file"].get<std::string>());
  auto transformers = [&](int32_t row) {
    return std::vector<float>(all.begin() + int64_t{row} * vocab + first,
                              all.begin() + int64_t{row} * vocab + first + count);
  };
  const nlohmann::json& cond = golden["sequences"]["cond"];
  const nlohmann::json& uncond = golden["sequences"]["uncond"];
  const auto cond_ids = cond["ids"].get<std::vector<int32_t>>();
  const auto uncond_ids = uncond["ids"].get<std::vector<int32_t>>();
  const int32_t cp = cond["prefill"].get<int32_t>(), up = uncond["prefill"].get<int32_t>();
  const int32_t c0 = cond["first_row"].get<int32_t>(), u0 = uncond["first_row"].get<int32_t>();
  const int32_t image_tokens = b->family.image_tokens;
  ASSERT_EQ(image_tokens, 1024);
  absl::StatusOr<sparse::ResolvedPolicy> dense = sparse::ResolvePolicy({}, image_tokens);
  ASSERT_TRUE(dense.ok()) << dense.status();

  model::Backend* be[2] = {b->cpu.get(), b->cuda.get()};
  kv::KvManager kv_cpu(*be[0]), kv_cuda(*be[1]);
  kv::KvManager* kv[2] = {&kv_cpu, &kv_cuda};
  model::SamplingSpec greedy;
  greedy.temperature = 0.0f;
  greedy.cfg_weight = kDefaultCfgWeight;
  const std::vector<model::SamplingSpec> sampling = {greedy};
  std::vector<float> logits[2] = {std::vector<float>(2 * count), std::vector<float>(2 * count)};
  std::vector<int32_t> sampled[2] = {{-1}, {-1}};

  // transformers' CFG pair: the prompt prefill, then its five image tokens through the KV cache.
  double vs_cpu = 0, vs_hf = 0;
  auto compare = [&](int32_t cond_row, int32_t uncond_row) {
    for (int r = 0; r < 2; ++r) {
      const std::vector<float> cpu(logits[0].begin() + r * count, logits[0].begin() + (r + 1) * count);
      vs_cpu = std::max(vs_cpu, RelativeError(logits[1].data() + r * count, cpu));
      vs_hf =
          std::max(vs_hf, RelativeError(logits[1].data() + r * count, transformers(r == 0 ? cond_row : uncond_row)));
    }
  };
  {
    std::vector<model::RowId> rows[2];
    for (int k = 0; k < 2; ++k) rows[k] = {*kv[k]->AllocateRow(cp, *dense), *kv[k]->AllocateRow(up, *dense)};
    std::vector<int32_t> tokens(cond_ids.begin(), cond_ids.begin() + cp);
    tokens.insert(tokens.end(), uncond_ids.begin(), uncond_ids.begin() + up);
    const std::vector<int32_t> offsets = {0, cp, cp + up};
    for (int k = 0; k < 2; ++k) {
      ASSERT_TRUE(be[k]->Prefill({rows[k], offsets, tokens, sampling}, {sampled[k], logits[k].data()}).ok());
    }
    compare(c0 + cp - 1, u0 + up - 1);
    for (int32_t s = 0; s + cp < static_cast<int32_t>(cond_ids.size()); ++s) {
      const std::vector<int32_t> input = {cond_ids[cp + s]}, step = {s};
      for (int k = 0; k < 2; ++k) {
        ASSERT_TRUE(be[k]->Decode({rows[k], input, step, sampling}, {sampled[k], logits[k].data()}).ok()) << s;
      }
      compare(c0 + cp + s, u0 + up + s);
    }
    for (int k = 0; k < 2; ++k) {
      for (model::RowId r : rows[k]) kv[k]->FreeRow(r);
    }
  }
  std::printf("measured %s: transformers' CFG pair, CUDA vs CPU max %.3g, CUDA vs transformers max %.3g (bound %.3g)\n",
              GetParam().c_str(), vs_cpu, vs_hf, kTolerance);
  EXPECT_LE(vs_cpu, kTolerance);
  EXPECT_LE(vs_hf, kTolerance);

  // A whole image teacher-forced with the CPU's greedy choices.
  const std::vector<int32_t> prompt(cond_ids.begin(), cond_ids.begin() + cp);
  const std::vector<int32_t> guidance(uncond_ids.begin(), uncond_ids.begin() + up);
  std::vector<model::RowId> rows[2];
  for (int k = 0; k < 2; ++k) rows[k] = {*kv[k]->AllocateRow(cp, *dense), *kv[k]->AllocateRow(up, *dense)};
  std::vector<int32_t> tokens = prompt;
  tokens.insert(tokens.end(), guidance.begin(), guidance.end());
  const std::vector<int32_t> offsets = {0, cp, cp + up};
  for (int k = 0; k < 2; ++k) {
    ASSERT_TRUE(be[k]->Prefill({rows[k], offsets, tokens, sampling}, {sampled[k], logits[k].data()}).ok());
  }
  double worst = 0, worst_gap_share = 0;
  int32_t worst_step = -1, agree = 0;
  for (int32_t t = 0; t < image_tokens; ++t) {
    for (int r = 0; r < 2; ++r) {
      const std::vector<float> cpu(logits[0].begin() + r * count, logits[0].begin() + (r + 1) * count);
      const double err = RelativeError(logits[1].data() + r * count, cpu);
      if (err > worst) worst = err, worst_step = t;
    }
    if (sampled[0][0] == sampled[1][0]) {
      ++agree;
    } else {
      const float* c = logits[0].data();
      const float* u = logits[0].data() + count;
      const double gap = GuidedGap(c, u, greedy.cfg_weight, sampled[0][0], sampled[1][0]);
      const double bound = GreedyGapBound(c, u, count, greedy.cfg_weight);
      worst_gap_share = std::max(worst_gap_share, gap / bound);
      EXPECT_LE(gap, bound) << "step " << t << ": CPU chose " << sampled[0][0] << ", CUDA " << sampled[1][0];
    }
    if (t + 1 == image_tokens) break;
    const std::vector<int32_t> input = {first + sampled[0][0]}, step = {t};
    for (int k = 0; k < 2; ++k) {
      ASSERT_TRUE(be[k]->Decode({rows[k], input, step, sampling}, {sampled[k], logits[k].data()}).ok()) << t;
    }
  }
  std::printf(
      "measured %s: 1,024 teacher-forced steps, CUDA vs CPU logits max %.3g (step %d), greedy agreeing %d of %d, "
      "largest differing choice's gap %.3g of its bound\n",
      GetParam().c_str(), worst, worst_step, agree, image_tokens, worst_gap_share);
  EXPECT_LE(worst, kTolerance);
  EXPECT_GE(agree, image_tokens * kMinGreedyAgreement);
  for (int k = 0; k < 2; ++k) {
    for (model::RowId r : rows[k]) kv[k]->FreeRow(r);
    EXPECT_EQ(kv[k]->BytesInUse(), 0);
  }
}

std::unique_ptr<model::GenericEngine> MakeEngine(const Layout& layout, const std::string& backend) {
  engine::EngineOptions options;
  options.model_dir = layout.dir;
  options.family_options = layout.options;
  options.backend = backend;
  options.threads = 2;
  options.max_batch_rows = 8;
  options.kv_budget_bytes = int64_t{256} << 20;
  absl::StatusOr<std::unique_ptr<model::GenericEngine>> e = model::CreateGenericEngine(options);
  EXPECT_TRUE(e.ok()) << backend << ": " << e.status();
  return e.ok() ? *std::move(e) : nullptr;
}

struct Generated {
  engine::PreparedRequest prepared;
  std::vector<int32_t> tokens;
};

Generated Generate(model::GenericEngine& e, const engine::GenerationRequest& r) {
  Generated out;
  absl::StatusOr<engine::PreparedRequest> p = e.Prepare(r);
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return out;
  out.prepared = *p;
  absl::StatusOr<engine::GroupId> id = e.Add(*p);
  EXPECT_TRUE(id.ok()) << id.status();
  if (!id.ok()) return out;
  for (int32_t step = 0; step <= e.info().image_tokens; ++step) {
    absl::StatusOr<engine::StepReport> rep = e.Step();
    EXPECT_TRUE(rep.ok()) << rep.status();
  }
  absl::StatusOr<engine::GroupState> s = e.State(*id);
  EXPECT_TRUE(s.ok() && s->finished);
  if (s.ok() && s->tokens.size() == 1) out.tokens = s->tokens[0];
  e.Remove(*id);
  EXPECT_EQ(e.KvBytesInUse(), 0);
  return out;
}

// `tokens` (the CUDA engine's) fed to the CPU backend with the request's
// policy, seed and draws: the steps where the CPU would have chosen another
// token. Greedy: *gap_share is the largest GuidedGap / GreedyGapBound of
// those steps (<= 1: within the bf16 bound).
int32_t ReplayMismatches(const Backends& b, const engine::PreparedRequest& p, const engine::GenerationRequest& r,
                         const std::vector<int32_t>& tokens, double* gap_share) {
  model::Backend& cpu = *b.cpu;
  kv::KvManager kv(cpu);
  const int32_t cp = static_cast<int32_t>(p.cond_ids.size()), up = static_cast<int32_t>(p.uncond_ids.size());
  std::vector<model::RowId> rows = {*kv.AllocateRow(cp, p.policy), *kv.AllocateRow(up, p.policy)};
  std::vector<int32_t> ids = p.cond_ids;
  ids.insert(ids.end(), p.uncond_ids.begin(), p.uncond_ids.end());
  const std::vector<int32_t> offsets = {0, cp, cp + up};
  model::SamplingSpec spec;
  spec.temperature = r.sampling.temperature;
  spec.top_k = r.sampling.top_k;
  spec.top_p = r.sampling.top_p;
  spec.cfg_weight = r.sampling.cfg_weight;
  spec.seed = r.sampling.seed;
  spec.image_index = 0;
  const std::vector<model::SamplingSpec> sampling = {spec};
  const int32_t count = b.family.spec.logits();
  std::vector<float> logits(2 * count);
  std::vector<int32_t> sampled = {-1};
  EXPECT_TRUE(cpu.Prefill({rows, offsets, ids, sampling}, {sampled, logits.data()}).ok());
  const int32_t first = b.family.spec.input.sampled_offset;
  int32_t mismatches = 0;
  *gap_share = 0;
  for (size_t t = 0; t < tokens.size(); ++t) {
    if (sampled[0] + first != tokens[t]) {
      ++mismatches;
      if (spec.temperature == 0.0f) {
        const float* c = logits.data();
        const float* u = logits.data() + count;
        *gap_share = std::max(*gap_share, GuidedGap(c, u, spec.cfg_weight, sampled[0], tokens[t] - first) /
                                              GreedyGapBound(c, u, count, spec.cfg_weight));
      }
    }
    if (t + 1 == tokens.size()) break;
    const std::vector<int32_t> input = {tokens[t]}, step = {static_cast<int32_t>(t)};
    EXPECT_TRUE(cpu.Decode({rows, input, step, sampling}, {sampled, logits.data()}).ok()) << t;
  }
  for (model::RowId row : rows) kv.FreeRow(row);
  return mismatches;
}

double Psnr(const engine::RgbImage& a, const engine::RgbImage& b) {
  if (a.rgb.size() != b.rgb.size() || a.rgb.empty()) return 0;
  double se = 0;
  for (size_t i = 0; i < a.rgb.size(); ++i) {
    const double d = static_cast<double>(a.rgb[i]) - static_cast<double>(b.rgb[i]);
    se += d * d;
  }
  const double mse = se / static_cast<double>(a.rgb.size());
  return mse == 0 ? 99.0 : 10.0 * std::log10(255.0 * 255.0 / mse);
}

TEST_P(AnoleCudaTest, EnginesGreedyAndSampledImagesAgree) {
  const Layout layout = LayoutOf(GetParam());
  std::unique_ptr<model::GenericEngine> cuda = MakeEngine(layout, "cuda");
  std::unique_ptr<model::GenericEngine> cpu = MakeEngine(layout, "cpu");
  std::unique_ptr<Backends> b = MakeBackends(layout);
  ASSERT_NE(cuda, nullptr);
  ASSERT_NE(cpu, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(cuda->info().backend, "cuda");
  EXPECT_EQ(cuda->info().image_tokens, 1024);
  EXPECT_EQ(cuda->info().grid.row_break_tokens, 0);
  const nlohmann::json golden = ReadJson(std::string(kGoldens) + "/goldens.json");

  struct Case {
    const char* name;
    float temperature;
    sparse::PolicyKind policy;
  };
  for (const Case& c : {Case{"greedy dense", 0.0f, sparse::PolicyKind::kDense},
                        Case{"greedy diagonal 95%", 0.0f, sparse::PolicyKind::kDiagonal},
                        Case{"sampled dense (t 0.7, top-p 0.9)", kDefaultTemperature, sparse::PolicyKind::kDense}}) {
    SCOPED_TRACE(c.name);
    engine::GenerationRequest r;
    r.prompt = golden["greedy"]["caption"].get<std::string>();
    r.sampling.cfg_weight = kDefaultCfgWeight;
    r.sampling.temperature = c.temperature;
    r.sampling.top_p = kDefaultTopP;
    r.sampling.top_k = 0;
    r.sampling.seed = 11;
    r.policy.kind = c.policy;
    r.policy.sparsity = c.policy == sparse::PolicyKind::kDense ? 0.0 : 0.95;
    const Generated on_cuda = Generate(*cuda, r);
    const Generated on_cpu = Generate(*cpu, r);
    ASSERT_EQ(on_cuda.tokens.size(), 1024u);
    ASSERT_EQ(on_cpu.tokens.size(), 1024u);
    if (c.policy == sparse::PolicyKind::kDiagonal) {
      EXPECT_EQ(on_cuda.prepared.policy.n_recent, 86);  // 8/3 of 32-token rows, rounded up
      EXPECT_EQ(on_cpu.prepared.policy.n_recent, 86);
    }
    if (c.temperature == 0.0f && c.policy == sparse::PolicyKind::kDense) {
      EXPECT_EQ(on_cpu.tokens, golden["greedy"]["tokens"].get<std::vector<int32_t>>()) << "CPU vs transformers";
    }
    int32_t differ = 0, first_diff = -1;
    for (size_t t = 0; t < on_cpu.tokens.size(); ++t) {
      if (on_cpu.tokens[t] != on_cuda.tokens[t]) {
        ++differ;
        if (first_diff < 0) first_diff = static_cast<int32_t>(t);
      }
    }
    double gap_share = 0;
    const int32_t mismatches = ReplayMismatches(*b, on_cpu.prepared, r, on_cuda.tokens, &gap_share);
    std::printf(
        "measured %s, %s: CUDA engine vs CPU engine: %d of 1024 tokens differ (first at %d); CUDA tokens replayed "
        "on the CPU: %d choices differ, largest differing greedy choice's gap %.3g of its bound\n",
        GetParam().c_str(), c.name, differ, first_diff, mismatches, gap_share);
    if (c.temperature == 0.0f && c.policy == sparse::PolicyKind::kDense) {
      EXPECT_LE(gap_share, 1.0);
      EXPECT_LE(mismatches, 1024 * (1 - kMinGreedyAgreement));
    } else {
      // Sampled draws, and the diagonal policy: its skip set is a per-step argmin over the
      // scores, so a near-tie that bf16 decides the other way changes the keys the CPU replay
      // attends from then on, and its logits leave any bf16 bound (H200: 279 of 1,024 choices,
      // gap 2.4x the bound). The planner itself is held bitwise to the host's by
      // kernels_policy_test and cuda_step_plan_test; here only the share of choices is bounded.
      EXPECT_LE(mismatches, 1024 * kMaxSampledReplayShare);
    }
    for (int32_t v : on_cuda.tokens) {
      ASSERT_GE(v, b->family.spec.input.sampled_offset);
      ASSERT_LT(v, b->family.spec.input.sampled_offset + b->family.spec.logits());
    }
    // The CUDA engine's image (GPU VQGAN) against the CPU engine's of the same tokens.
    absl::StatusOr<std::vector<engine::RgbImage>> got = cuda->DecodeImages({on_cuda.tokens});
    absl::StatusOr<std::vector<engine::RgbImage>> want = cpu->DecodeImages({on_cuda.tokens});
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(want.ok()) << want.status();
    EXPECT_EQ((*got)[0].width, 64);
    EXPECT_EQ((*got)[0].height, 64);
    const double psnr = Psnr((*got)[0], (*want)[0]);
    std::printf("measured %s, %s: GPU VQGAN vs CPU VQGAN PSNR %.1f dB (bound %.0f)\n", GetParam().c_str(), c.name, psnr,
                kMinPsnrDb);
    EXPECT_GE(psnr, kMinPsnrDb);
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, AnoleCudaTest, ::testing::Values("hf", "meta"),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

}  // namespace
}  // namespace argen::anole
