// NextStep-1 on the CPU backend's vector step against one official
// NextStepPipeline.generate_image run on the tiny checkpoint
// (tests/goldens/tiny/tiny-nextstep, "generate"): the decoder stack with q/k/v
// biases over the official prompt rows, token vectors fed back through
// image_in_projector as kept vectors (kMadeVector), and image_out_projector
// on the final-normed hidden states must hand the token head what the
// official pipeline handed its head at every token (teacher-forced: the
// recording head returns the official tokens). Then the family's own token
// head end to end.
#include <cmath>
#include <memory>

#include "engine/checkpoint/checkpoint.h"
#include "engine/families/nextstep/nextstep_spec.h"
#include "engine/families/nextstep/nextstep_token_head.h"
#include "engine/kv/kv_manager.h"
#include "engine/model/backend_registry.h"
#include "engine/model/step_plan.h"
#include "engine/model/weight_source.h"
#include "engine/sparse/policy_params.h"
#include "gtest/gtest.h"
#include "tests/support/golden_files.h"

namespace argen::nextstep {
namespace {

using test_support::ReadF32;
using test_support::ReadJson;
using test_support::RelativeError;
using test_support::SourceDir;

const char kRel[] = "tests/goldens/tiny/tiny-nextstep";
std::string Dir() { return SourceDir() + "/" + kRel; }

// Returns the official run's tokens and keeps the conditions it was handed.
class RecordingHead final : public model::TokenHead {
 public:
  RecordingHead(int32_t width, int32_t dim, std::vector<float> tokens)
      : width_(width), dim_(dim), tokens_(std::move(tokens)) {}
  int32_t condition_width() const override { return width_; }
  int32_t token_dim() const override { return dim_; }
  absl::Status Draw(std::span<const float> cond, std::span<const float> uncond,
                    std::span<const model::SamplingSpec> sampling, std::span<const int32_t> token_index,
                    std::span<float> out) const override {
    for (size_t i = 0; i < sampling.size(); ++i) {
      const int32_t t = token_index[i];
      if (conditions_.size() <= static_cast<size_t>(t)) conditions_.resize(t + 1);
      conditions_[t].assign(cond.begin() + i * width_, cond.begin() + (i + 1) * width_);
      conditions_[t].insert(conditions_[t].end(), uncond.begin() + i * width_, uncond.begin() + (i + 1) * width_);
      std::copy(tokens_.begin() + t * dim_, tokens_.begin() + (t + 1) * dim_, out.begin() + i * dim_);
    }
    return absl::OkStatus();
  }
  // Per token: cond then uncond condition.
  mutable std::vector<std::vector<float>> conditions_;

 private:
  int32_t width_, dim_;
  std::vector<float> tokens_;
};

class NextStepBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const nlohmann::json all = ReadJson(std::string(kRel) + "/goldens.json");
    golden_ = all["generate"];
    prompt_ = all["prompts"][0];
    ASSERT_EQ(prompt_["caption"], golden_["caption"]);
    ASSERT_EQ(prompt_["grid_h"], golden_["grid"]);
    absl::StatusOr<NextStepConfig> c = LoadNextStepConfig(Dir());
    ASSERT_TRUE(c.ok()) << c.status();
    config_ = *c;
    absl::StatusOr<model::ModelSpec> spec = NextStepSpec(config_);
    ASSERT_TRUE(spec.ok()) << spec.status();
    spec_ = *spec;
    absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::Checkpoint::Open(Dir());
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    checkpoint_ = *std::move(ckpt);
    tokens_ = golden_["grid"].get<int32_t>() * golden_["grid"].get<int32_t>();
  }

  absl::StatusOr<std::unique_ptr<model::Backend>> Backend(std::shared_ptr<const model::TokenHead> head) {
    model::BackendOptions options;
    options.max_batch_rows = 8;
    options.threads = 2;
    options.token_head = std::move(head);
    return model::CreateCpuBackend(spec_, model::CheckpointWeights(checkpoint_), options);
  }

  // One image: the prompt rows, then token t fed back as the kept vector; every drawn token.
  absl::StatusOr<std::vector<float>> Generate(model::Backend& be, const model::SamplingSpec& sampling) {
    kv::KvManager kv(be);
    absl::StatusOr<sparse::ResolvedPolicy> dense = sparse::ResolvePolicy({}, tokens_);
    if (!dense.ok()) return dense.status();
    const std::vector<int32_t> rows_ids[2] = {prompt_["cond"].get<std::vector<int32_t>>(),
                                              prompt_["uncond"].get<std::vector<int32_t>>()};
    model::RowId rows[2];
    for (int i = 0; i < 2; ++i) {
      absl::StatusOr<model::RowId> r = kv.AllocateRow(static_cast<int32_t>(rows_ids[i].size()), *dense);
      if (!r.ok()) return r.status();
      rows[i] = *r;
    }
    const int32_t D = spec_.output.token_dim;
    std::vector<float> drawn(static_cast<size_t>(tokens_) * D);
    model::StepPlanBuilder builder;
    for (int32_t t = -1; t + 1 < tokens_; ++t) {  // t: the decode index fed (-1: the prompt step)
      builder.Clear();
      for (int i = 0; i < 2; ++i) {
        builder.AddRow(rows[i]);
        if (t < 0) {
          builder.AddPromptQueries(rows_ids[i], 0, static_cast<int32_t>(rows_ids[i].size()));
        } else {
          builder.AddMadeVectorQuery(t);
        }
      }
      builder.AddSampling(sampling);
      int32_t sampled = -1;
      if (absl::Status s = be.Forward(builder.Plan(), {{&sampled, 1}, nullptr, drawn.data() + (t + 1) * D}); !s.ok()) {
        return s;
      }
    }
    for (model::RowId r : rows) kv.FreeRow(r);
    return drawn;
  }

  nlohmann::json golden_, prompt_;
  NextStepConfig config_;
  model::ModelSpec spec_;
  std::shared_ptr<const checkpoint::Checkpoint> checkpoint_;
  int32_t tokens_ = 0;
};

TEST_F(NextStepBackendTest, EveryConditionIsTheOfficialRunsTeacherForced) {
  const int32_t H = config_.hidden_size;
  const std::vector<float> official_tokens = ReadF32(Dir() + "/" + golden_["tokens"].get<std::string>());
  auto head = std::make_shared<RecordingHead>(H, spec_.output.token_dim, official_tokens);
  absl::StatusOr<std::unique_ptr<model::Backend>> be = Backend(head);
  ASSERT_TRUE(be.ok()) << be.status();
  model::SamplingSpec sampling;
  sampling.cfg_weight = golden_["cfg"];
  absl::StatusOr<std::vector<float>> drawn = Generate(**be, sampling);
  ASSERT_TRUE(drawn.ok()) << drawn.status();
  EXPECT_EQ(*drawn, official_tokens);  // StepOutputs::token_vectors: what the head drew
  // image_out_projector of the official final-normed hidden states.
  absl::StatusOr<std::vector<float>> w = checkpoint_->LoadF32("image_out_projector.weight", {H, H});
  absl::StatusOr<std::vector<float>> b = checkpoint_->LoadF32("image_out_projector.bias", {H});
  ASSERT_TRUE(w.ok() && b.ok());
  const std::vector<float> hidden = ReadF32(Dir() + "/" + golden_["hidden"].get<std::string>());
  ASSERT_EQ(head->conditions_.size(), static_cast<size_t>(tokens_));
  for (int32_t t = 0; t < tokens_; ++t) {
    std::vector<float> want(2 * H);
    for (int32_t r = 0; r < 2; ++r) {
      const float* h = hidden.data() + (static_cast<size_t>(t) * 2 + r) * H;
      for (int32_t o = 0; o < H; ++o) {
        double acc = (*b)[o];
        for (int32_t i = 0; i < H; ++i) acc += double{(*w)[static_cast<size_t>(o) * H + i]} * h[i];
        want[r * H + o] = static_cast<float>(acc);
      }
    }
    EXPECT_LT(RelativeError(head->conditions_[t].data(), want), 1e-4) << "token " << t;
  }
}

TEST_F(NextStepBackendTest, TheFamilysTokenHeadReproducesASeedAndNormsItsTokens) {
  FlowSampling s;
  s.steps = golden_["steps"];
  s.timesteps_shift = golden_["timesteps_shift"];
  absl::StatusOr<std::shared_ptr<const NextStepTokenHead>> head = NextStepTokenHead::Load(*checkpoint_, config_, s);
  ASSERT_TRUE(head.ok()) << head.status();
  absl::StatusOr<std::unique_ptr<model::Backend>> be = Backend(*head);
  ASSERT_TRUE(be.ok()) << be.status();
  model::SamplingSpec sampling;
  sampling.cfg_weight = golden_["cfg"];
  sampling.seed = 5;
  absl::StatusOr<std::vector<float>> a = Generate(**be, sampling);
  absl::StatusOr<std::vector<float>> again = Generate(**be, sampling);
  ASSERT_TRUE(a.ok() && again.ok()) << a.status() << again.status();
  EXPECT_EQ(*a, *again);
  sampling.seed = 6;
  absl::StatusOr<std::vector<float>> other = Generate(**be, sampling);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(*a, *other);
  const int32_t D = spec_.output.token_dim;
  for (int32_t t = 0; t < tokens_; ++t) {  // use_norm: each token has mean 0 and variance 1
    double sum = 0, sq = 0;
    for (int32_t i = 0; i < D; ++i) sum += (*a)[t * D + i];
    for (int32_t i = 0; i < D; ++i) sq += std::pow((*a)[t * D + i] - sum / D, 2);
    EXPECT_NEAR(sum / D, 0.0, 1e-5) << t;
    EXPECT_NEAR(sq / D, 1.0, 1e-3) << t;
  }
}

TEST_F(NextStepBackendTest, TheSpecIsAVectorModelWithQkvBiases) {
  EXPECT_TRUE(spec_.stack.qkv_bias);
  EXPECT_TRUE(spec_.vector_tokens());
  EXPECT_EQ(spec_.output.token_dim, config_.token_dim());
  EXPECT_EQ(spec_.vector_head_in(), config_.hidden_size);
  EXPECT_EQ(spec_.input.vector_in.weight.name, "image_in_projector.weight");
  EXPECT_FALSE(spec_.input.table.present());
  // A code model's backend options (no token head) are refused for it.
  absl::StatusOr<std::unique_ptr<model::Backend>> be = Backend(nullptr);
  EXPECT_EQ(be.status().code(), absl::StatusCode::kInvalidArgument) << be.status();
}

}  // namespace
}  // namespace argen::nextstep
