// The CUDA backend against the CPU backend (the f32 reference) on the tiny
// checkpoints: prefill and teacher-forced decode logits of two CFG pairs with
// different prompt lengths, the second joining later, for dense and sparse
// policies. The CUDA path stores weights and KV in bf16, so logits agree to
// a bf16 tolerance and sampled tokens agree except near CDF boundaries.
// Score- and selection-driven policies (h2o, tova, alisa, diagonal*) choose
// keys from those probabilities, so once a near-tie resolves differently in
// bf16 the two backends legitimately attend different sets: their logits are
// held to the tolerance until the first selection can take effect, after that
// only to finiteness and token agreement. That the device runs exactly the
// CPU's selections for the same probabilities is policy_kernels_test's job.
// weight_dtype fp8 cases load both backends with fp8 layer weights (the CPU
// rounds its f32 weights and GEMM inputs through the same e4m3 grid).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/families/janus/janus_config.h"
#include "engine/families/janus/janus_spec.h"
#include "engine/kv/kv_manager.h"
#include "engine/model/backend_registry.h"
#include "engine/model/weight_source.h"
#include "engine/sparse/policy_params.h"

namespace argen::cuda {
namespace {

constexpr double kLogitTolerance = 3e-2;  // ||cuda - cpu|| / ||cpu|| per row, bf16 weights and KV
constexpr double kMinTokenAgreement = 0.85;
// kv_cache_dtype fp8 on both: the same e4m3 grid, from bf16 (CUDA) and f32
// (CPU) inputs, so a few codes land one step apart.
constexpr double kFp8LogitTolerance = 6e-2;  // 4.6-5.4e-2 measured on the H200
// ... and the selections that follow near-ties diverge more often (0.79-0.82 measured).
constexpr double kFp8MinTokenAgreement = 0.75;
// weight_dtype fp8 on both: identical weight codes (both quantize the same
// bf16 values), but GEMM inputs quantized from activations that already
// differ by the bf16 KV and arithmetic above: on these 64-wide random models a
// code one e4m3 step apart (6-12% of that value) does not average out, so the
// backends drift apart like fp8 and f32 weights do on the CPU (up to 0.26,
// cpu_fp8_weights_test). Measured on the H200: worst 0.11-0.20, tokens 61-84%
// agree. What this catches is a wrong scale, layout or code (errors near 1);
// the fp8 GEMM itself is held to 1e-3 of float64 by cuda_gemm_test.
constexpr double kFp8WeightLogitTolerance = 0.3;
constexpr double kFp8WeightMinTokenAgreement = 0.5;

struct Dims {
  int32_t image_vocab = 0, text_vocab = 0;
  int32_t num_layers = 0, num_kv_heads = 0;
};

struct Backends {
  Dims dims;
  std::unique_ptr<model::Backend> cpu, cuda;
  std::unique_ptr<kv::KvManager> cpu_kv, cuda_kv;  // their rows
};

absl::StatusOr<model::ModelSpec> TinySpec(const std::string& dir) {
  absl::StatusOr<janus::JanusConfig> config = janus::LoadJanusConfig(dir);
  if (!config.ok()) return config.status();
  return janus::JanusSpec(*config);
}

Backends Load(const std::string& relative, model::WeightFormat weight_format = model::WeightFormat::kAuto) {
  Backends b;
  const char* src = std::getenv("ARGEN_SOURCE_DIR");
  const std::string dir = std::string(src ? src : ".") + "/" + relative;
  absl::StatusOr<model::ModelSpec> spec = TinySpec(dir);
  EXPECT_TRUE(spec.ok()) << spec.status();
  if (!spec.ok()) return b;
  b.dims = {spec->logits(), spec->text_vocab(), spec->stack.num_layers, spec->stack.num_kv_heads};
  model::BackendOptions options;
  options.max_batch_rows = 8;
  options.max_prompt_tokens = 64;
  options.kv_budget_bytes = 64 << 20;
  options.weight_format = weight_format;
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::Checkpoint::Open(dir);
    EXPECT_TRUE(ckpt.ok()) << ckpt.status();
    if (!ckpt.ok()) return b;
    std::shared_ptr<const model::WeightSource> weights = model::CheckpointWeights(std::move(*ckpt));
    auto backend =
        i == 0 ? model::CreateCpuBackend(*spec, weights, options) : model::CreateCudaBackend(*spec, weights, options);
    EXPECT_TRUE(backend.ok()) << backend.status();
    if (!backend.ok()) return b;
    (i == 0 ? b.cpu : b.cuda) = std::move(*backend);
    (i == 0 ? b.cpu_kv : b.cuda_kv) = std::make_unique<kv::KvManager>(i == 0 ? *b.cpu : *b.cuda);
  }
  return b;
}

double RowError(const std::vector<float>& got, const std::vector<float>& want, int row, int vocab) {
  double num = 0, den = 0;
  for (int v = 0; v < vocab; ++v) {
    const double a = got[row * vocab + v], b = want[row * vocab + v];
    if (!std::isfinite(a)) return INFINITY;
    num += (a - b) * (a - b);
    den += b * b;
  }
  return std::sqrt(num / den);
}

struct PolicyCase {
  std::string checkpoint;
  sparse::PolicyKind kind;
  double sparsity;
  // kv_cache_dtype: none, fp8 for both pairs, or fp8 for the first pair and
  // auto (bf16) for the second, so that decode batches mix the two formats.
  enum Fp8 { kNoFp8, kAllFp8, kMixedFp8 } fp8 = kNoFp8;
  bool fp8_weights = false;  // weight_dtype fp8 on both backends
};

std::string Fp8Suffix(PolicyCase::Fp8 fp8) {
  return fp8 == PolicyCase::kAllFp8 ? "_fp8" : fp8 == PolicyCase::kMixedFp8 ? "_mixed_fp8" : "";
}

class CudaBackendTest : public ::testing::TestWithParam<PolicyCase> {};

TEST_P(CudaBackendTest, LogitsAndTokensMatchCpuBackend) {
  const PolicyCase pc = GetParam();
  Backends b = Load(pc.checkpoint, pc.fp8_weights ? model::WeightFormat::kFp8 : model::WeightFormat::kAuto);
  ASSERT_NE(b.cpu, nullptr);
  ASSERT_NE(b.cuda, nullptr);
  const int vocab = b.dims.image_vocab, l_dec = 40;
  sparse::PolicyParams params;
  params.kind = pc.kind;
  params.sparsity = pc.sparsity;
  // An 8 x 5 grid for the grid policies; ssd: every other head semantic.
  sparse::HeadClasses classes{b.dims.num_layers, b.dims.num_kv_heads, {}};
  for (int h = 0; h < b.dims.num_layers * b.dims.num_kv_heads; ++h) classes.semantic.push_back(h % 2);
  absl::StatusOr<sparse::ResolvedPolicy> policy =
      sparse::ResolvePolicy(params, sparse::GridGeometry{8, 0, l_dec}, &classes);
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_EQ(b.cuda->KvBytesPerTokenRow() * 2, b.cpu->KvBytesPerTokenRow());  // bf16 vs f32
  // The first pair's policy and the second's (they differ in kv format for kMixedFp8).
  sparse::ResolvedPolicy policies[2] = {*policy, *policy};
  if (pc.fp8 != PolicyCase::kNoFp8) policies[0].kv_format = sparse::KvFormat::kFp8E4m3;
  if (pc.fp8 == PolicyCase::kAllFp8) policies[1].kv_format = sparse::KvFormat::kFp8E4m3;
  const double tolerance = pc.fp8_weights                 ? kFp8WeightLogitTolerance
                           : pc.fp8 != PolicyCase::kNoFp8 ? kFp8LogitTolerance
                                                          : kLogitTolerance;
  if (pc.fp8 != PolicyCase::kNoFp8) {
    // fp8 rows keep a byte per element and an fp32 scale per vector instead of
    // two bytes per element; the policy state is the same.
    const int32_t head_dim =
        static_cast<int32_t>(b.cuda->KvBytesPerTokenRow() / (4 * b.dims.num_layers * b.dims.num_kv_heads));
    const int64_t vectors = int64_t{2} * b.dims.num_layers * b.dims.num_kv_heads * (13 + policy->n_slots);
    auto aligned = [](int64_t x) { return (x + 255) / 256 * 256; };
    EXPECT_EQ(b.cuda->RowBytes(13, *policy) - b.cuda->RowBytes(13, policies[0]),
              aligned(vectors * head_dim * 2) - aligned(vectors * (head_dim + 4)));
    EXPECT_EQ(b.cpu->RowBytes(13, policies[0]), b.cpu->RowBytes(13, *policy));  // the CPU keeps f32
  }

  std::mt19937 rng(7);
  std::uniform_int_distribution<int> tok(0, b.dims.text_vocab - 1);
  struct Pair {
    int prompt_len;
    sparse::ResolvedPolicy policy;
    std::vector<model::RowId> cpu_rows, cuda_rows;
    int next_step = 0;
    int32_t next_token = 0;
    model::SamplingSpec spec;
  };
  // Decode steps whose attended sets cannot depend on a selection yet.
  int strict_until = l_dec;
  switch (pc.kind) {
    case sparse::PolicyKind::kH2O:
    case sparse::PolicyKind::kTova:
    case sparse::PolicyKind::kAlisa:
      strict_until = policy->n_slots;
      break;
    case sparse::PolicyKind::kDiagonal:
    case sparse::PolicyKind::kDiagonalSink4:
    case sparse::PolicyKind::kDiagonalGrid:
      strict_until = policy->n_att;
      break;
    case sparse::PolicyKind::kSsd:
      strict_until = 2;
      break;  // semantic heads evict by score early
    case sparse::PolicyKind::kLineEvict:
      strict_until = policy->n_slots - policy->grid_period + 1;  // no eviction before a line start past the keep
      break;
    default:
      break;
  }
  std::vector<Pair> pairs(2);
  pairs[0].prompt_len = 13;
  pairs[1].prompt_len = 7;
  pairs[0].policy = policies[0];
  pairs[1].policy = policies[1];
  pairs[1].spec.top_k = 20;
  pairs[1].spec.top_p = 0.9f;
  pairs[1].spec.seed = 99;
  pairs[1].spec.image_index = 1;
  int agree = 0, total = 0;
  double worst = 0;

  auto prefill = [&](Pair& p) {
    std::vector<int32_t> tokens(2 * p.prompt_len);
    for (auto& t : tokens) t = tok(rng);
    const std::vector<int32_t> offsets = {0, p.prompt_len, 2 * p.prompt_len};
    std::vector<model::SamplingSpec> sampling = {p.spec};
    std::vector<float> logits[2];
    std::vector<int32_t> sampled[2];
    for (int i = 0; i < 2; ++i) {
      model::Backend& be = i == 0 ? *b.cpu : *b.cuda;
      kv::KvManager& kv = i == 0 ? *b.cpu_kv : *b.cuda_kv;
      auto& rows = i == 0 ? p.cpu_rows : p.cuda_rows;
      for (int k = 0; k < 2; ++k) {
        absl::StatusOr<model::RowId> row = kv.AllocateRow(p.prompt_len, p.policy);
        ASSERT_TRUE(row.ok()) << row.status();
        rows.push_back(*row);
      }
      logits[i].resize(2 * vocab);
      sampled[i].assign(1, -1);
      absl::Status s = be.Prefill({rows, offsets, tokens, sampling}, {sampled[i], logits[i].data()});
      ASSERT_TRUE(s.ok()) << s;
    }
    for (int r = 0; r < 2; ++r) {
      const double err = RowError(logits[1], logits[0], r, vocab);
      worst = std::max(worst, err);
      EXPECT_LE(err, tolerance) << "prefill row " << r;
    }
    agree += sampled[0][0] == sampled[1][0];
    ++total;
    p.next_token = sampled[0][0];  // teacher forcing: both continue from the CPU's token
  };

  auto decode = [&](std::vector<Pair*> batch) {
    std::vector<model::RowId> rows[2];
    std::vector<int32_t> tokens, steps;
    std::vector<model::SamplingSpec> sampling;
    for (Pair* p : batch) {
      rows[0].insert(rows[0].end(), p->cpu_rows.begin(), p->cpu_rows.end());
      rows[1].insert(rows[1].end(), p->cuda_rows.begin(), p->cuda_rows.end());
      tokens.push_back(p->next_token);
      steps.push_back(p->next_step);
      sampling.push_back(p->spec);
    }
    const int n_rows = 2 * batch.size();
    std::vector<float> logits[2];
    std::vector<int32_t> sampled[2];
    for (int i = 0; i < 2; ++i) {
      model::Backend& be = i == 0 ? *b.cpu : *b.cuda;
      logits[i].resize(n_rows * vocab);
      sampled[i].assign(batch.size(), -1);
      absl::Status s = be.Decode({rows[i], tokens, steps, sampling}, {sampled[i], logits[i].data()});
      ASSERT_TRUE(s.ok()) << s;
    }
    for (int r = 0; r < n_rows; ++r) {
      const double err = RowError(logits[1], logits[0], r, vocab);
      ASSERT_TRUE(std::isfinite(err)) << "decode step " << steps[r / 2] << " row " << r;
      if (steps[r / 2] >= strict_until) continue;
      worst = std::max(worst, err);
      EXPECT_LE(err, tolerance) << "decode step " << steps[r / 2] << " row " << r;
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      agree += sampled[0][i] == sampled[1][i];
      ++total;
      ASSERT_GE(sampled[1][i], 0);
      ASSERT_LT(sampled[1][i], vocab);
      batch[i]->next_token = sampled[0][i];
      batch[i]->next_step += 1;
    }
  };

  ASSERT_NO_FATAL_FAILURE(prefill(pairs[0]));
  for (int s = 0; s < 5; ++s) ASSERT_NO_FATAL_FAILURE(decode({&pairs[0]}));
  ASSERT_NO_FATAL_FAILURE(prefill(pairs[1]));
  while (pairs[1].next_step < l_dec) {
    std::vector<Pair*> batch;
    for (Pair& p : pairs)
      if (p.next_step < l_dec) batch.push_back(&p);
    ASSERT_NO_FATAL_FAILURE(decode(batch));
  }
  const double rate = static_cast<double>(agree) / total;
  std::printf("[ %s %s fp8 %d fp8 weights %d ] worst logit error %.2e (steps < %d), token agreement %d/%d\n",
              pc.checkpoint.c_str(), std::string(sparse::PolicyName(pc.kind)).c_str(), static_cast<int>(pc.fp8),
              pc.fp8_weights ? 1 : 0, worst, strict_until, agree, total);
  EXPECT_GE(rate, pc.fp8_weights                 ? kFp8WeightMinTokenAgreement
                  : pc.fp8 != PolicyCase::kNoFp8 ? kFp8MinTokenAgreement
                                                 : kMinTokenAgreement);
  // The pool holds exactly what the rows cost (KV and policy state), and gets it back.
  const int64_t in_use = b.cuda_kv->BytesInUse();
  EXPECT_EQ(in_use, 2 * b.cuda->RowBytes(13, policies[0]) + 2 * b.cuda->RowBytes(7, policies[1]));
  for (Pair& p : pairs)
    for (model::RowId r : p.cuda_rows) b.cuda_kv->FreeRow(r);
  EXPECT_EQ(b.cuda_kv->BytesInUse(), 0);
}

INSTANTIATE_TEST_SUITE_P(
    Policies, CudaBackendTest,
    ::testing::Values(
        PolicyCase{"tests/goldens/tiny/tiny-mha", sparse::PolicyKind::kDense, 0.0},
        PolicyCase{"tests/goldens/tiny/tiny-gqa-sharded", sparse::PolicyKind::kDense, 0.0},
        PolicyCase{"tests/goldens/tiny/tiny-mha", sparse::PolicyKind::kSlidingWindow, 0.8},
        PolicyCase{"tests/goldens/tiny/tiny-mha", sparse::PolicyKind::kStreamingLlm, 0.8},
        PolicyCase{"tests/goldens/tiny/tiny-gqa-sharded", sparse::PolicyKind::kH2O, 0.8},
        PolicyCase{"tests/goldens/tiny/tiny-mha", sparse::PolicyKind::kTova, 0.8},
        PolicyCase{"tests/goldens/tiny/tiny-mha", sparse::PolicyKind::kAlisa, 0.8},
        PolicyCase{"tests/goldens/tiny/tiny-mha", sparse::PolicyKind::kDiagonal, 0.8},
        PolicyCase{"tests/goldens/tiny/tiny-gqa-sharded", sparse::PolicyKind::kDiagonalSink4, 0.8},
        PolicyCase{"tests/goldens/tiny/tiny-mha", sparse::PolicyKind::kGridWindow, 0.7},
        PolicyCase{"tests/goldens/tiny/tiny-gqa-sharded", sparse::PolicyKind::kDiagonalGrid, 0.7},
        PolicyCase{"tests/goldens/tiny/tiny-gqa-sharded", sparse::PolicyKind::kSsd, 0.7},
        PolicyCase{"tests/goldens/tiny/tiny-gqa-sharded", sparse::PolicyKind::kLineEvict, 0.5},  // >= 2 lines + 1
        PolicyCase{"tests/goldens/tiny/tiny-mha", sparse::PolicyKind::kDense, 0.0, PolicyCase::kAllFp8},
        PolicyCase{"tests/goldens/tiny/tiny-gqa-sharded", sparse::PolicyKind::kDense, 0.0, PolicyCase::kMixedFp8},
        PolicyCase{"tests/goldens/tiny/tiny-mha", sparse::PolicyKind::kDiagonal, 0.8, PolicyCase::kAllFp8},
        PolicyCase{"tests/goldens/tiny/tiny-gqa-sharded", sparse::PolicyKind::kDiagonal, 0.8, PolicyCase::kMixedFp8},
        PolicyCase{"tests/goldens/tiny/tiny-gqa-sharded", sparse::PolicyKind::kH2O, 0.8, PolicyCase::kAllFp8},
        PolicyCase{"tests/goldens/tiny/tiny-mha", sparse::PolicyKind::kDense, 0.0, PolicyCase::kNoFp8, true},
        PolicyCase{"tests/goldens/tiny/tiny-gqa-sharded", sparse::PolicyKind::kDiagonal, 0.8, PolicyCase::kNoFp8, true},
        PolicyCase{"tests/goldens/tiny/tiny-mha", sparse::PolicyKind::kDiagonal, 0.8, PolicyCase::kAllFp8, true}),
    [](const ::testing::TestParamInfo<PolicyCase>& info) {
      return std::string(sparse::PolicyName(info.param.kind)) +
             (info.param.checkpoint.find("gqa") != std::string::npos ? "_gqa" : "_mha") + Fp8Suffix(info.param.fp8) +
             (info.param.fp8_weights ? "_fp8_weights" : "");
    });

}  // namespace
}  // namespace argen::cuda

namespace argen::cuda {
namespace {

// Decode steps replayed from captured CUDA graphs sample exactly the tokens of
// eagerly launched steps, in a batch mixing a dense and a diagonal pair.
TEST(CudaBackendGraphTest, GraphReplayMatchesEagerLaunches) {
  const char* src = std::getenv("ARGEN_SOURCE_DIR");
  const std::string dir = std::string(src ? src : ".") + "/tests/goldens/tiny/tiny-mha";
  absl::StatusOr<model::ModelSpec> spec = TinySpec(dir);
  ASSERT_TRUE(spec.ok()) << spec.status();
  model::BackendOptions options;
  options.max_batch_rows = 8;
  options.max_prompt_tokens = 64;
  options.kv_budget_bytes = 64 << 20;
  const int l_dec = 48;
  sparse::PolicyParams diag_params;
  diag_params.kind = sparse::PolicyKind::kDiagonal;
  diag_params.sparsity = 0.8;
  absl::StatusOr<sparse::ResolvedPolicy> dense = sparse::ResolvePolicy({}, l_dec);
  absl::StatusOr<sparse::ResolvedPolicy> diag = sparse::ResolvePolicy(diag_params, l_dec);
  ASSERT_TRUE(dense.ok() && diag.ok());
  std::vector<std::vector<int32_t>> tokens_by_mode;
  for (bool graphs : {true, false}) {
    absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::Checkpoint::Open(dir);
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    auto backend = model::CreateCudaBackend(*spec, model::CheckpointWeights(std::move(*ckpt)), options);
    ASSERT_TRUE(backend.ok()) << backend.status();
    auto* cuda = dynamic_cast<CudaBackend*>(backend->get());
    ASSERT_NE(cuda, nullptr);
    cuda->SetGraphs(graphs);
    kv::KvManager kv(*cuda);
    std::vector<model::RowId> rows;
    for (const auto* p : {&*dense, &*dense, &*diag, &*diag}) {
      absl::StatusOr<model::RowId> r = kv.AllocateRow(9, *p);
      ASSERT_TRUE(r.ok()) << r.status();
      rows.push_back(*r);
    }
    std::vector<int32_t> prompt(36);
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>((i * 37 + 11) % spec->text_vocab());
    const std::vector<int32_t> offsets = {0, 9, 18, 27, 36};
    std::vector<model::SamplingSpec> sampling(2);
    sampling[1].seed = 5;
    sampling[1].top_k = 16;
    std::vector<int32_t> sampled(2), steps(2), all;
    ASSERT_TRUE(cuda->Prefill({rows, offsets, prompt, sampling}, {sampled, nullptr}).ok());
    all.insert(all.end(), sampled.begin(), sampled.end());
    for (int t = 0; t + 1 < l_dec; ++t) {
      const std::vector<int32_t> next = sampled;
      steps = {t, t};
      absl::Status s = cuda->Decode({rows, next, steps, sampling}, {sampled, nullptr});
      ASSERT_TRUE(s.ok()) << s;
      all.insert(all.end(), sampled.begin(), sampled.end());
    }
    tokens_by_mode.push_back(all);
  }
  EXPECT_EQ(tokens_by_mode[0], tokens_by_mode[1]);
}

}  // namespace
}  // namespace argen::cuda
