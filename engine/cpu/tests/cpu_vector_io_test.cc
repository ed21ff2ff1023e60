// Vector inputs and outputs of the step plan (engine/model/step_plan.h) on
// the CPU backend, the reference:
// * a prompt given as embeddings runs exactly as its token ids do when the
//   embeddings are those ids' rows of the text embedding table;
// * a vector model (spec.output.token_dim > 0): its output stage hands the
//   conditions to the family's token head and keeps what it draws; feeding
//   those vectors back as kept vectors (kMadeVector, nothing from the host)
//   one token per step, or from the host (kTokenVector) k at a time, gives
//   the same vectors bitwise (row-invariant GEMMs); a kept vector that was
//   never made, row logits of a vector model, and missing or mismatched token
//   heads are InvalidArgument;
// * q/k/v biases (stack.qkv_bias): zero biases change nothing, others do.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/cpu/cpu_backend.h"
#include "engine/cpu/gemm.h"
#include "engine/cpu/tests/golden_util.h"
#include "engine/kv/kv_manager.h"
#include "engine/model/backend_registry.h"
#include "engine/model/tests/step_plan_harness.h"
#include "engine/model/token_head.h"
#include "kernels/sampling_rng.h"

namespace argen::cpu {
namespace {

using model::InputSource;
using model::QueryKind;
using model::StepPlanBuilder;

constexpr int32_t kLDec = 36;
constexpr int32_t kTokenDim = 6;
constexpr int32_t kConditionWidth = 10;

// A token head whose draw depends on both conditions, the guidance weight
// and keyed noise (so a wrong row, pair or key shows).
class TestTokenHead final : public model::TokenHead {
 public:
  int32_t condition_width() const override { return kConditionWidth; }
  int32_t token_dim() const override { return kTokenDim; }
  absl::Status Draw(std::span<const float> cond, std::span<const float> uncond,
                    std::span<const model::SamplingSpec> sampling, std::span<const int32_t> token_index,
                    std::span<float> out) const override {
    for (size_t i = 0; i < sampling.size(); ++i) {
      for (int32_t j = 0; j < kTokenDim; ++j) {
        double acc = 0;
        for (int32_t k = 0; k < kConditionWidth; ++k) {
          const double c = cond[i * kConditionWidth + k], u = uncond[i * kConditionWidth + k];
          acc += std::sin(1.0 + j + 0.37 * k) * (u + sampling[i].cfg_weight * (c - u));
        }
        const float noise = kernels::SampleUniform(sampling[i].seed + j, static_cast<uint32_t>(sampling[i].image_index),
                                                   static_cast<uint32_t>(token_index[i]));
        out[i * kTokenDim + j] = static_cast<float>(std::tanh(acc)) + 0.25f * (noise - 0.5f);
      }
    }
    return absl::OkStatus();
  }
};

// The tiny Janus shape made a vector model: tokens of kTokenDim floats in
// through vector_in, out through vector_out and the test head.
model::ModelSpec VectorSpec(const model::ModelSpec& tiny) {
  model::ModelSpec spec = tiny;
  const int32_t H = spec.stack.hidden_size;
  spec.output.token_dim = kTokenDim;
  spec.output.head = {};
  spec.output.projector = {};
  spec.input.vector_in = model::Linear("vector_in", H, kTokenDim, /*bias=*/true);
  spec.output.vector_out = model::Linear("vector_out", kConditionWidth, H, /*bias=*/true);
  spec.input.table = {};
  spec.input.fc1 = {};
  spec.input.fc2 = {};
  return spec;
}

class CpuVectorIoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tiny_ = testing::LoadTinyBackend("tests/goldens/tiny/tiny-gqa-sharded").spec;
    ASSERT_GT(tiny_.stack.hidden_size, 0);
  }
  void TearDown() override { SetRowInvariantGemms(false); }

  absl::StatusOr<std::unique_ptr<model::Backend>> Create(const model::ModelSpec& spec,
                                                         std::shared_ptr<const model::TokenHead> head) {
    model::BackendOptions options;
    options.max_batch_rows = 8;
    options.threads = 2;
    options.token_head = std::move(head);
    return model::CreateCpuBackend(spec, model::RandomWeights(7, 0.05f), options);
  }

  model::ModelSpec tiny_;
};

TEST_F(CpuVectorIoTest, PromptEmbeddingsRunAsTheirTokenIds) {
  model::BackendOptions options;
  options.max_batch_rows = 8;
  options.threads = 2;
  testing::LoadedBackend loaded = testing::LoadTinyBackend("tests/goldens/tiny/tiny-gqa-sharded", 0.0f, options);
  ASSERT_NE(loaded.backend, nullptr);
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt =
      checkpoint::Checkpoint::Open(testing::SourceDir() + "/tests/goldens/tiny/tiny-gqa-sharded");
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  const model::testing::ForcedEmbeddings embeddings =
      model::testing::ForcedPromptEmbeddings(*model::CheckpointWeights(std::move(*ckpt)), loaded.spec);
  kv::KvManager kv(*loaded.backend);
  const std::vector<int32_t> tokens = model::testing::ForcedTokens(kLDec - 1, loaded.spec.input_rows());
  for (const model::testing::PolicyCase& c :
       model::testing::EveryPolicyCase(kLDec, loaded.spec.stack.num_layers, loaded.spec.stack.num_kv_heads)) {
    for (int32_t chunk : {0, 1, 4}) {
      model::testing::ForcedRun ids, vectors;
      ASSERT_TRUE(model::testing::RunForced(*loaded.backend, kv, c.policy, tokens, chunk, 3, &ids).ok()) << c.name;
      ASSERT_TRUE(
          model::testing::RunForced(*loaded.backend, kv, c.policy, tokens, chunk, 3, &vectors, nullptr, &embeddings)
              .ok())
          << c.name;
      const model::testing::RunDifference d = model::testing::Difference(vectors, ids);
      EXPECT_TRUE(d.bitwise) << c.name << ", chunk " << chunk << ": worst " << d.worst;
    }
  }
  EXPECT_EQ(kv.BytesInUse(), 0);
}

TEST_F(CpuVectorIoTest, EmbeddingsOutsideThePlanOrOnPromptRowsAreRefused) {
  model::BackendOptions options;
  options.max_batch_rows = 8;
  testing::LoadedBackend loaded = testing::LoadTinyBackend("tests/goldens/tiny/tiny-gqa-sharded", 0.0f, options);
  ASSERT_NE(loaded.backend, nullptr);
  kv::KvManager kv(*loaded.backend);
  absl::StatusOr<sparse::ResolvedPolicy> dense = sparse::ResolvePolicy({}, kLDec);
  ASSERT_TRUE(dense.ok());
  absl::StatusOr<model::RowId> a = kv.AllocateRow(2, *dense), b = kv.AllocateRow(2, *dense);
  ASSERT_TRUE(a.ok() && b.ok());
  const int32_t H = loaded.spec.stack.hidden_size;
  std::vector<float> rows(2 * H, 0.01f);
  StepPlanBuilder builder;
  builder.AddRow(*a);
  builder.AddPromptEmbeddings(rows, H, 0, 2);
  builder.AddRow(*b);
  builder.AddPromptEmbeddings(rows, H, 0, 2);
  builder.AddSampling({});
  model::StepPlan plan = builder.Plan();
  std::vector<model::Query> queries(plan.queries.begin(), plan.queries.end());
  queries[1].input = 9;  // no such embedding row
  plan.queries = queries;
  int32_t sampled = -1;
  absl::Status s = loaded.backend->Forward(plan, {{&sampled, 1}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("outside prompt_embeddings"), std::string::npos) << s;
  EXPECT_EQ(loaded.backend->FindLiveRow(*a)->prompt_filled, 0);
  // A prompt row keeps its prompt's ids for later sharers: embeddings cannot go there.
  absl::StatusOr<model::RowId> p = kv.AllocatePromptRow(2, sparse::KvFormat::kAuto);
  ASSERT_TRUE(p.ok()) << p.status();
  builder.Clear();
  builder.AddPromptRow(*p);
  builder.AddPromptEmbeddings(rows, H, 0, 2);
  s = loaded.backend->Forward(builder.Plan(), {{}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("prompt row"), std::string::npos) << s;
  for (model::RowId r : {*a, *b, *p}) kv.FreeRow(r);
}

// One pair's run of a vector model: the prompts as ids, then decode token t
// fed at index t, `k` per step, as kept vectors (`made`) or from `given`.
struct VectorRun {
  std::vector<std::vector<float>> drawn;  // per token index
};
absl::Status RunVectors(model::Backend& be, kv::KvManager& kv, int32_t tokens, int32_t k, bool made,
                        const VectorRun* given, VectorRun* run) {
  absl::StatusOr<sparse::ResolvedPolicy> dense = sparse::ResolvePolicy({}, kLDec);
  if (!dense.ok()) return dense.status();
  const std::vector<int32_t>* prompts[2] = {&model::testing::kForcedCond, &model::testing::kForcedUncond};
  model::RowId rows[2];
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<model::RowId> r = kv.AllocateRow(static_cast<int32_t>(prompts[i]->size()), *dense);
    if (!r.ok()) return r.status();
    rows[i] = *r;
  }
  model::SamplingSpec sampling;
  sampling.seed = 99;
  sampling.cfg_weight = 2.5f;
  StepPlanBuilder builder;
  std::vector<int32_t> sampled;
  std::vector<float> vectors;
  const auto step = [&](int32_t outputs, int32_t first_token) -> absl::Status {
    sampled.assign(outputs, -1);
    vectors.assign(static_cast<size_t>(outputs) * kTokenDim, NAN);
    if (absl::Status s = be.Forward(builder.Plan(), {sampled, nullptr, vectors.data()}); !s.ok()) return s;
    for (int32_t o = 0; o < outputs; ++o) {
      if (sampled[o] != 0) return absl::InternalError("a vector model's sampled entry is not 0");
      run->drawn.resize(first_token + o + 1);
      run->drawn[first_token + o].assign(vectors.begin() + o * kTokenDim, vectors.begin() + (o + 1) * kTokenDim);
    }
    return absl::OkStatus();
  };
  for (int i = 0; i < 2; ++i) {
    builder.AddRow(rows[i]);
    builder.AddPromptQueries(*prompts[i], 0, static_cast<int32_t>(prompts[i]->size()));
  }
  builder.AddSampling(sampling);
  if (absl::Status s = step(1, 0); !s.ok()) return s;
  for (int32_t t = 0; t < tokens;) {
    const int32_t n = std::min(k, tokens - t);
    builder.Clear();
    for (int i = 0; i < 2; ++i) {
      builder.AddRow(rows[i]);
      for (int32_t j = 0; j < n; ++j) {
        if (made) {
          builder.AddMadeVectorQuery(t + j);
        } else {
          builder.AddTokenVectorQuery(given->drawn[t + j], t + j);
        }
      }
    }
    builder.AddSampling(sampling);
    if (absl::Status s = step(n, t + 1); !s.ok()) return s;
    t += n;
  }
  for (model::RowId r : rows) kv.FreeRow(r);
  return absl::OkStatus();
}

TEST_F(CpuVectorIoTest, KeptVectorsAndGivenVectorsDrawTheSameTokens) {
  SetRowInvariantGemms(true);
  absl::StatusOr<std::unique_ptr<model::Backend>> be = Create(VectorSpec(tiny_), std::make_shared<TestTokenHead>());
  ASSERT_TRUE(be.ok()) << be.status();
  kv::KvManager kv(**be);
  constexpr int32_t kTokens = 12;
  VectorRun sequential;
  ASSERT_TRUE(RunVectors(**be, kv, kTokens, 1, /*made=*/true, nullptr, &sequential).ok());
  ASSERT_EQ(sequential.drawn.size(), static_cast<size_t>(kTokens + 1));
  // The tokens differ from each other (the inputs reach the output).
  EXPECT_NE(sequential.drawn[1], sequential.drawn[2]);
  for (int32_t k : {1, 3, 5, kTokens}) {
    VectorRun forced;
    ASSERT_TRUE(RunVectors(**be, kv, kTokens, k, /*made=*/false, &sequential, &forced).ok()) << k;
    ASSERT_EQ(forced.drawn.size(), sequential.drawn.size());
    for (size_t t = 0; t < forced.drawn.size(); ++t) {
      EXPECT_EQ(forced.drawn[t], sequential.drawn[t]) << "k " << k << ", token " << t;
    }
  }
  // A different guidance input to the head changes what is drawn.
  VectorRun perturbed = sequential;
  perturbed.drawn[3][0] += 0.5f;
  VectorRun changed;
  ASSERT_TRUE(RunVectors(**be, kv, kTokens, 2, /*made=*/false, &perturbed, &changed).ok());
  EXPECT_EQ(changed.drawn[3], sequential.drawn[3]);  // made before the change is fed
  EXPECT_NE(changed.drawn[4], sequential.drawn[4]);
  EXPECT_EQ(kv.BytesInUse(), 0);
}

TEST_F(CpuVectorIoTest, AVectorNotMadeYetAndLogitsOfAVectorModelAreRefused) {
  absl::StatusOr<std::unique_ptr<model::Backend>> be = Create(VectorSpec(tiny_), std::make_shared<TestTokenHead>());
  ASSERT_TRUE(be.ok()) << be.status();
  kv::KvManager kv(**be);
  absl::StatusOr<sparse::ResolvedPolicy> dense = sparse::ResolvePolicy({}, kLDec);
  ASSERT_TRUE(dense.ok());
  absl::StatusOr<model::RowId> c = kv.AllocateRow(3, *dense), u = kv.AllocateRow(3, *dense);
  ASSERT_TRUE(c.ok() && u.ok());
  StepPlanBuilder builder;
  const std::vector<int32_t> prompt = {1, 2, 3};
  for (model::RowId r : {*c, *u}) {
    builder.AddRow(r);
    builder.AddPromptQueries(prompt, 0, 3);
  }
  builder.AddSampling({});
  int32_t sampled[2] = {-1, -1};
  std::vector<float> logits(1024);
  absl::Status s = (*be)->Forward(builder.Plan(), {{sampled, 1}, logits.data()});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("row_logits"), std::string::npos) << s;
  ASSERT_TRUE((*be)->Forward(builder.Plan(), {{sampled, 1}}).ok());  // makes token 0
  // Token 1 is made by the query at index 0, not before: feeding it now is refused.
  builder.Clear();
  for (model::RowId r : {*c, *u}) {
    builder.AddRow(r);
    builder.AddMadeVectorQuery(0);
    builder.AddMadeVectorQuery(1);
  }
  builder.AddSampling({});
  s = (*be)->Forward(builder.Plan(), {{sampled, 2}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("token 1's vector has not been made"), std::string::npos) << s;
  EXPECT_EQ((*be)->FindLiveRow(*c)->next_step, 0);
  // A token vector of the wrong width.
  builder.Clear();
  for (model::RowId r : {*c, *u}) {
    builder.AddRow(r);
    builder.AddTokenVectorQuery(std::vector<float>(kTokenDim + 1, 0.0f), 0);
  }
  builder.AddSampling({});
  s = (*be)->Forward(builder.Plan(), {{sampled, 1}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("token_dim"), std::string::npos) << s;
  for (model::RowId r : {*c, *u}) kv.FreeRow(r);
}

TEST_F(CpuVectorIoTest, TokenHeadsMustMatchTheModel) {
  absl::StatusOr<std::unique_ptr<model::Backend>> be = Create(VectorSpec(tiny_), nullptr);
  EXPECT_EQ(be.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(be.status().message().find("token head"), std::string::npos) << be.status();
  model::ModelSpec wider = VectorSpec(tiny_);
  wider.output.vector_out = model::Linear("vector_out", kConditionWidth + 1, tiny_.stack.hidden_size, true);
  be = Create(wider, std::make_shared<TestTokenHead>());
  EXPECT_EQ(be.status().code(), absl::StatusCode::kInvalidArgument) << be.status();
  be = Create(tiny_, std::make_shared<TestTokenHead>());  // a code model
  EXPECT_EQ(be.status().code(), absl::StatusCode::kInvalidArgument) << be.status();
  model::ModelSpec no_in = VectorSpec(tiny_);
  no_in.input.vector_in = {};
  be = Create(no_in, std::make_shared<TestTokenHead>());
  EXPECT_EQ(be.status().code(), absl::StatusCode::kInvalidArgument) << be.status();
  EXPECT_NE(be.status().message().find("vector_in"), std::string::npos) << be.status();
}

// q/k/v biases: zero ones give exactly the bias-free stack; random ones change the logits.
TEST_F(CpuVectorIoTest, QkvBiasesAreAddedToTheProjections) {
  const auto first_logits = [&](const model::ModelSpec& spec) {
    absl::StatusOr<std::unique_ptr<model::Backend>> be = Create(spec, nullptr);
    EXPECT_TRUE(be.ok()) << be.status();
    if (!be.ok()) return std::vector<float>{};
    kv::KvManager kv(**be);
    absl::StatusOr<sparse::ResolvedPolicy> dense = sparse::ResolvePolicy({}, kLDec);
    model::testing::ForcedRun run;
    EXPECT_TRUE(model::testing::RunForced(**be, kv, *dense, {1, 2, 3}, 0, 1, &run).ok());
    return run.logits.empty() ? std::vector<float>{} : run.logits.back();
  };
  const std::vector<float> plain = first_logits(tiny_);
  ASSERT_FALSE(plain.empty());
  for (model::TensorFill fill : {model::TensorFill::kZero, model::TensorFill::kBias}) {
    model::ModelSpec spec = tiny_;
    spec.stack.qkv_bias = true;
    for (size_t l = 0; l < spec.layers.size(); ++l) {
      for (model::LinearRef* p : {&spec.layers[l].q, &spec.layers[l].k, &spec.layers[l].v}) {
        p->bias = model::Tensor(p->weight.name + ".bias", {p->weight.shape[0]}, fill);
      }
    }
    const std::vector<float> got = first_logits(spec);
    if (fill == model::TensorFill::kZero) {
      EXPECT_EQ(got, plain);
    } else {
      EXPECT_NE(got, plain);
    }
  }
  model::ModelSpec missing = tiny_;
  missing.stack.qkv_bias = true;  // and no bias tensors
  EXPECT_EQ(Create(missing, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace argen::cpu
