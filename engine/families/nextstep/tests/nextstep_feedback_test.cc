// How a small error grows through NextStep-1's continuous-token feedback,
// measured on the CPU backend (the reference) with the tiny checkpoint
// (tests/goldens/tiny/tiny-nextstep) and cuda_nextstep_test's request
// (seed 5, CFG 3, images 0 and 1 in every step): each drawn token is fed
// back through image_in_projector, so an error in token t changes every
// later condition, and this random-weight model amplifies it. Prints every
// token's relative error (against the unperturbed run) for: one token
// perturbed (1e-3, token 0), every token perturbed (1e-2, 2e-2: the device
// head's own error on identical conditions, cuda_flow_head_test), every
// condition perturbed (3e-3), and the decoder's matrices and fed-back
// tokens rounded to bf16 (the CUDA backend's storage), each free running
// and teacher forced (fed the reference's tokens). Measured (image 0 /
// image 1, worst token):
//   token 0 by 1e-3     free 0.19 / 1.57 (growth 190x / 1570x)   forced 0 after token 0
//   every token by 2e-2 free 1.77 / 1.79                         forced 0.02
//   conditions by 3e-3  free 1.28 / 1.78                         forced 0.023 / 0.014
//   bf16 matrices+inputs free 1.06 / 1.71 (token 4: 0.084 / 0.60) forced 0.031 / 0.041
// The bf16 free-running profile is the device engine run's of issue 31
// (image 1, tokens 4-6: CPU bf16 0.60 1.06 1.71, device 0.574 1.06 1.66): a
// correct device run decorrelates from the CPU's within the image, so only
// teacher-forced steps (and token 0) can be held to a bound.
// Asserts: the CPU runs are deterministic however tokens are fed; teacher
// forcing keeps a step's error its own (no propagation; bf16 rounding
// within 0.06); free running grows a one-token error more than kMinGrowth
// times and bf16 rounding alone moves a late token more than
// kBf16Decorrelates. A change to the model, sampler or feedback that
// damps (or further amplifies) the feedback shows here first.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "engine/families/nextstep/tests/nextstep_token_runs.h"
#include "engine/model/backend_registry.h"
#include "tests/support/golden_files.h"

namespace argen::nextstep {
namespace {

using token_runs::Feed;
using token_runs::ImageTokens;
using token_runs::ProbeHead;

constexpr int32_t kImages = 2;
// A one-token error of 1e-3 grows at least this much within the image
// (measured 190x and 1570x; a quarter of the smaller).
constexpr double kMinGrowth = 50;
// The decoder's bf16 rounding alone moves some late token at least this much
// free running (measured 1.15 and 1.68).
constexpr double kBf16Decorrelates = 0.3;

class NextStepFeedbackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<token_runs::TinyNextStep> m = token_runs::TinyNextStep::Load(
        test_support::SourceDir() + "/tests/goldens/tiny/tiny-nextstep", "a photo of a red circle");
    ASSERT_TRUE(m.ok()) << m.status();
    m_ = *std::move(m);
    sampling_.cfg_weight = 3.0f;
    sampling_.seed = 5;
  }

  // A run on a fresh CPU backend whose head perturbs as `p`.
  ImageTokens Run(const Feed& feed, ProbeHead::Perturbation p = {}, bool bf16_weights = false) {
    model::BackendOptions options;
    options.max_batch_rows = 2 * kImages * 4;
    options.threads = 1;
    options.token_head = std::make_shared<ProbeHead>(m_.head, p);
    std::shared_ptr<const model::WeightSource> weights = model::CheckpointWeights(m_.checkpoint);
    if (bf16_weights) weights = std::make_shared<token_runs::Bf16MatrixWeights>(weights);
    absl::StatusOr<std::unique_ptr<model::Backend>> be = model::CreateCpuBackend(m_.spec, weights, options);
    EXPECT_TRUE(be.ok()) << be.status();
    if (!be.ok()) return {};
    absl::StatusOr<ImageTokens> tokens = token_runs::RunImages(**be, m_, kImages, sampling_, feed);
    EXPECT_TRUE(tokens.ok()) << tokens.status();
    return tokens.ok() ? *tokens : ImageTokens{};
  }

  // Prints every token's error against `want`; returns them per image.
  std::vector<std::vector<double>> Report(const std::string& what, const ImageTokens& got, const ImageTokens& want) {
    const std::vector<std::vector<double>> e = token_runs::TokenErrors(got, want, m_.token_dim());
    for (size_t i = 0; i < e.size(); ++i) {
      std::string line = what + ", image " + std::to_string(i) + ":";
      for (double x : e[i]) {
        char buf[32];
        std::snprintf(buf, sizeof(buf), " %.3g", x);
        line += buf;
      }
      std::cout << line << "\n";
    }
    return e;
  }

  static Feed Own(bool bf16 = false) {
    Feed f;
    f.kind = Feed::Kind::kOwn;
    f.round_to_bf16 = bf16;
    return f;
  }
  static Feed Forced(const ImageTokens& tokens) {
    Feed f;
    f.kind = Feed::Kind::kForced;
    f.forced = &tokens;
    return f;
  }
  static double Worst(const std::vector<std::vector<double>>& e) {
    double w = 0;
    for (const std::vector<double>& r : e) {
      for (double x : r) w = std::max(w, x);
    }
    return w;
  }

  token_runs::TinyNextStep m_;
  model::SamplingSpec sampling_;
};

// The reference's tokens again, fed back kept, by the host, or teacher forced: the same bits.
TEST_F(NextStepFeedbackTest, TheCpuRunIsDeterministicHoweverTokensAreFed) {
  const ImageTokens ref = Run({});
  ASSERT_EQ(ref.size(), static_cast<size_t>(kImages));
  EXPECT_EQ(Run({}), ref) << "the CPU run is not deterministic";
  EXPECT_EQ(Run(Own()), ref) << "kept and host-given vectors differ";
  EXPECT_EQ(Run(Forced(ref)), ref) << "teacher forcing with the run's own tokens differs";
  // The other plans cuda_nextstep_test runs: 3 tokens given a step, image 1
  // reading image 0's prompt KV (the engine's layout).
  Feed three = Forced(ref);
  three.per_step = 3;
  Feed shared;
  shared.share_prompts = true;
  const double tolerance = 5e-5;  // other row counts in the CPU's GEMMs (measured 5.6e-6)
  const auto e3 = token_runs::TokenErrors(Run(three), ref, m_.token_dim());
  const auto es = token_runs::TokenErrors(Run(shared), ref, m_.token_dim());
  EXPECT_LE(Worst(e3), tolerance) << "3 tokens a step";
  EXPECT_LE(Worst(es), tolerance) << "shared prompt KV";
  std::cout << "3 a step: " << Worst(e3) << ", shared prompt: " << Worst(es) << "\n";
}

// Fed the reference's tokens, a step's error stays that step's: a
// perturbed token 0 changes nothing after it, and the decoder's bf16
// rounding moves each token by a few 1e-2 at most (the device test's
// teacher-forced bound, 0.1, is this plus the head's own 5e-2).
TEST_F(NextStepFeedbackTest, TeacherForcingKeepsEachStepsErrorItsOwn) {
  const ImageTokens ref = Run({});
  ASSERT_EQ(ref.size(), static_cast<size_t>(kImages));
  const auto one = Report("token 0 by 1e-3, forced", Run(Forced(ref), {0, 1e-3, 0}), ref);
  for (const std::vector<double>& e : one) {
    ASSERT_EQ(e.size(), static_cast<size_t>(m_.image_tokens()));
    EXPECT_NEAR(e[0], 1e-3, 1e-6);
    for (size_t t = 1; t < e.size(); ++t) EXPECT_EQ(e[t], 0.0) << "token " << t;
  }
  Report("every token by 2e-2, forced", Run(Forced(ref), {0, 2e-2, -1}), ref);
  const auto cond = Report("conditions by 3e-3, forced", Run(Forced(ref), {3e-3, 0, -1}), ref);
  Feed forced16 = Forced(ref);
  forced16.round_to_bf16 = true;
  const auto bf16 = Report("bf16 matrices + inputs, forced", Run(forced16, {}, true), ref);
  // Measured 0.023 and 0.041.
  EXPECT_LE(Worst(cond), 0.05);
  EXPECT_LE(Worst(bf16), 0.06);
}

// Free running, the same errors grow along the image: a 1e-3 error in token
// 0 alone reaches 0.19 (image 0) and 1.57 (image 1) by tokens 6-8 (growth
// 190x and 1570x), and the decoder's bf16 rounding alone (no head error)
// moves the late tokens by ~1 (1.15 and 1.68): two correct runs whose
// arithmetic differs by bf16 decorrelate within this 9-token image, so a
// free-running device run can be compared with the CPU's at token 0 only.
TEST_F(NextStepFeedbackTest, FreeRunningAmplifiesASmallError) {
  const ImageTokens ref = Run({});
  ASSERT_EQ(ref.size(), static_cast<size_t>(kImages));
  const auto one = Report("token 0 by 1e-3, free", Run({}, {0, 1e-3, 0}), ref);
  for (size_t i = 0; i < one.size(); ++i) {
    const double growth = *std::max_element(one[i].begin(), one[i].end()) / 1e-3;
    std::cout << "image " << i << ": a 1e-3 error in token 0 grows " << growth << "x\n";
    EXPECT_GE(growth, kMinGrowth) << "image " << i;
  }
  Report("every token by 1e-2, free", Run({}, {0, 1e-2, -1}), ref);
  Report("every token by 2e-2, free", Run({}, {0, 2e-2, -1}), ref);
  Report("conditions by 3e-3, free", Run({}, {3e-3, 0, -1}), ref);
  Report("bf16 inputs, free", Run(Own(true)), ref);
  const auto bf16 = Report("bf16 matrices + inputs, free", Run(Own(true), {}, true), ref);
  for (size_t i = 0; i < bf16.size(); ++i) {
    EXPECT_GE(*std::max_element(bf16[i].begin(), bf16[i].end()), kBf16Decorrelates) << "image " << i;
  }
}

}  // namespace
}  // namespace argen::nextstep
