// The device flow-matching head (engine/cuda/device_flow_head.h) against the
// CPU head (engine/families/nextstep/flow_head.cc, itself held to the official
// code's goldens) on the tiny NextStep checkpoint's image_head
// (tests/goldens/tiny/tiny-nextstep): the velocity at several times, and
// whole sampled tokens (the family's 50 steps, CFG on the velocity, the same
// keyed noise: both draw kernels/sampling_rng.h's SampleNormal4 for (seed,
// image, token, draw)), guided and not, several pairs in one launch sequence
// and more pairs than one chunk. Prints every measured error. Needs a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/device_buffer.h"
#include "engine/cuda/device_flow_head.h"
#include "engine/cuda/gemm.h"
#include "engine/families/nextstep/nextstep_config.h"
#include "engine/families/nextstep/nextstep_spec.h"
#include "engine/families/nextstep/nextstep_token_head.h"
#include "kernels/sampling.h"

namespace argen::cuda {
namespace {

// ||device - cpu|| / ||cpu|| per row. The device rounds the weights and every
// GEMM input to bf16 (relative 2^-9 each, independent signs) and accumulates
// in fp32; the net is 2 + 3 blocks GEMMs deep with a residual stream, so a
// random walk over its inputs gives a few 1e-3. 2e-2 leaves ~5x for the
// LayerNorms' amplification of small-variance rows.
constexpr double kVelocityTolerance = 2e-2;
// A whole token: 50 velocities, each with that error, through the SDE (whose
// score term pulls x back towards the data and so damps, not compounds,
// earlier errors) and CFG (which multiplies the branches' difference by cfg).
// The final LayerNorm makes the token unit-scale. Measured on the device is
// the bound to keep; this one is 2.5x the velocity's.
constexpr double kTokenTolerance = 5e-2;

std::string Dir() {
  const char* src = std::getenv("ARGEN_SOURCE_DIR");
  return std::string(src ? src : ".") + "/tests/goldens/tiny/tiny-nextstep";
}

// Deterministic values in [-scale, scale).
std::vector<float> Values(size_t n, uint32_t seed, float scale) {
  std::vector<float> v(n);
  uint32_t s = seed * 2654435761u + 12345u;
  for (float& e : v) {
    s = s * 1664525u + 1013904223u;
    e = scale * (static_cast<float>(s >> 8) / 8388608.0f - 1.0f);
  }
  return v;
}

double RowError(const float* got, const float* want, int32_t n) {
  double num = 0, den = 0;
  for (int32_t i = 0; i < n; ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    num += (double{got[i]} - want[i]) * (double{got[i]} - want[i]);
    den += double{want[i]} * want[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

class CudaFlowHeadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<nextstep::NextStepConfig> config = nextstep::LoadNextStepConfig(Dir());
    ASSERT_TRUE(config.ok()) << config.status();
    absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::Checkpoint::Open(Dir());
    ASSERT_TRUE(ckpt.ok()) << ckpt.status();
    checkpoint_ = *std::move(ckpt);
    absl::StatusOr<std::shared_ptr<const nextstep::NextStepTokenHead>> head =
        nextstep::NextStepTokenHead::Load(*checkpoint_, *config, nextstep::FlowSampling{});
    ASSERT_TRUE(head.ok()) << head.status();
    cpu_ = *std::move(head);
    ASSERT_NE(cpu_->flow_matching(), nullptr);
    absl::StatusOr<std::unique_ptr<DeviceFlowHead>> device = DeviceFlowHead::Create(*cpu_->flow_matching());
    ASSERT_TRUE(device.ok()) << device.status();
    device_ = *std::move(device);
    ASSERT_EQ(cudaStreamCreate(&stream_), cudaSuccess);
    ASSERT_TRUE(gemm_.Init(stream_).ok());
  }
  void TearDown() override {
    if (stream_ != nullptr) cudaStreamSynchronize(stream_);
    gemm_.Reset();
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
  }

  // The device's tokens for `pairs` pairs: cond and uncond [pairs x C].
  std::vector<float> DeviceTokens(const std::vector<float>& cond, const std::vector<float>& uncond,
                                  const std::vector<model::SamplingSpec>& sampling,
                                  const std::vector<int32_t>& tokens) {
    const int32_t pairs = static_cast<int32_t>(sampling.size()), C = device_->cond_dim(), D = device_->token_dim();
    std::vector<float> rows(static_cast<size_t>(2) * pairs * C);
    std::vector<kernels::PairSampling> ps(pairs);
    for (int32_t p = 0; p < pairs; ++p) {
      std::copy_n(cond.begin() + int64_t{p} * C, C, rows.begin() + int64_t{2 * p} * C);
      std::copy_n(uncond.begin() + int64_t{p} * C, C, rows.begin() + int64_t{2 * p + 1} * C);
      ps[p].cfg_weight = sampling[p].cfg_weight;
      ps[p].seed = sampling[p].seed;
      ps[p].image_index = sampling[p].image_index;
      ps[p].step = tokens[p];
    }
    absl::StatusOr<DeviceBuffer> c = DeviceBuffer::Allocate(rows.size() * 4, "conditions");
    absl::StatusOr<DeviceBuffer> s = DeviceBuffer::Allocate(ps.size() * sizeof(kernels::PairSampling), "sampling");
    absl::StatusOr<DeviceBuffer> t = DeviceBuffer::Allocate(static_cast<size_t>(pairs) * D * 4, "tokens");
    absl::StatusOr<DeviceBuffer> flag = DeviceBuffer::Allocate(4, "flag");
    EXPECT_TRUE(c.ok() && s.ok() && t.ok() && flag.ok());
    if (!c.ok() || !s.ok() || !t.ok() || !flag.ok()) return {};
    EXPECT_EQ(cudaMemcpy(c->as(), rows.data(), c->bytes(), cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(s->as(), ps.data(), s->bytes(), cudaMemcpyHostToDevice), cudaSuccess);
    EXPECT_EQ(cudaMemset(flag->as(), 0, 4), cudaSuccess);
    absl::Status st = device_->EnqueueSample(gemm_, stream_, c->as<float>(), s->as<kernels::PairSampling>(), pairs,
                                             t->as<float>(), nullptr, nullptr, flag->as<int32_t>());
    EXPECT_TRUE(st.ok()) << st;
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    std::vector<float> out(static_cast<size_t>(pairs) * D);
    int32_t nonfinite = -1;
    EXPECT_EQ(cudaMemcpy(out.data(), t->as(), t->bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(&nonfinite, flag->as(), 4, cudaMemcpyDeviceToHost), cudaSuccess);
    EXPECT_EQ(nonfinite, 0);
    return out;
  }

  std::shared_ptr<const checkpoint::Checkpoint> checkpoint_;
  std::shared_ptr<const nextstep::NextStepTokenHead> cpu_;
  std::unique_ptr<DeviceFlowHead> device_;
  cudaStream_t stream_ = nullptr;
  Gemm gemm_;
};

TEST_F(CudaFlowHeadTest, VelocityMatchesTheCpuHead) {
  const model::FlowMatchingHeadDesc& desc = *cpu_->flow_matching();
  const int32_t n = 7, D = desc.token_dim, C = desc.cond_dim;
  // The CPU net of the same description: FlowHead::Velocity through a head
  // loaded like the token head's (nextstep::FlowHead is what the token head wraps).
  absl::StatusOr<nextstep::NextStepConfig> config = nextstep::LoadNextStepConfig(Dir());
  ASSERT_TRUE(config.ok());
  const nextstep::FlowHeadDims dims{config->token_dim(), config->hidden_size, config->fm_head_dim,
                                    config->fm_head_layers};
  absl::StatusOr<std::unique_ptr<nextstep::FlowHead>> cpu = nextstep::FlowHead::Load(
      [this](const std::string& name, const std::vector<int64_t>& shape) { return checkpoint_->LoadF32(name, shape); },
      nextstep::kFlowHeadPrefix, dims);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  const std::vector<float> x = Values(static_cast<size_t>(n) * D, 1, 1.5f),
                           c = Values(static_cast<size_t>(n) * C, 2, 1.0f);
  double worst = 0;
  for (float t : {0.0f, 0.37f, 0.9f, desc.times.back()}) {
    std::vector<float> want(static_cast<size_t>(n) * D), got(want.size());
    (*cpu)->Velocity(x.data(), t, c.data(), n, want.data());
    ASSERT_TRUE(device_->Velocity(gemm_, stream_, x.data(), t, c.data(), n, got.data()).ok());
    for (int32_t r = 0; r < n; ++r) {
      const double e = RowError(got.data() + r * D, want.data() + r * D, D);
      worst = std::max(worst, e);
      EXPECT_LE(e, kVelocityTolerance) << "t " << t << " row " << r;
    }
  }
  std::cout << "velocity: worst relative row error " << worst << " (bound " << kVelocityTolerance << ")\n";
}

TEST_F(CudaFlowHeadTest, SampledTokensMatchTheCpuHead) {
  const int32_t C = device_->cond_dim(), D = device_->token_dim();
  ASSERT_EQ(device_->steps(), 50);
  // Guided at two weights, unguided (cfg 1: the cond branch alone), other
  // seeds, images and token indices, all in one launch sequence.
  std::vector<model::SamplingSpec> sampling(4);
  sampling[0].cfg_weight = 7.5f;
  sampling[0].seed = 5;
  sampling[1].cfg_weight = 3.0f;
  sampling[1].seed = 5;
  sampling[1].image_index = 1;
  sampling[2].cfg_weight = 1.0f;
  sampling[2].seed = 11;
  sampling[3].cfg_weight = 7.5f;
  sampling[3].seed = 0xfedcba9876543210ull;
  sampling[3].image_index = 3;
  const std::vector<int32_t> tokens = {0, 4, 8, 1023};
  const int32_t pairs = static_cast<int32_t>(sampling.size());
  const std::vector<float> cond = Values(static_cast<size_t>(pairs) * C, 3, 1.0f),
                           uncond = Values(static_cast<size_t>(pairs) * C, 4, 1.0f);
  std::vector<float> want(static_cast<size_t>(pairs) * D);
  ASSERT_TRUE(cpu_->Draw(cond, uncond, sampling, tokens, want).ok());
  const std::vector<float> got = DeviceTokens(cond, uncond, sampling, tokens);
  ASSERT_EQ(got.size(), want.size());
  for (int32_t p = 0; p < pairs; ++p) {
    const double e = RowError(got.data() + p * D, want.data() + p * D, D);
    std::cout << "token of pair " << p << " (cfg " << sampling[p].cfg_weight << "): relative error " << e << " (bound "
              << kTokenTolerance << ")\n";
    EXPECT_LE(e, kTokenTolerance) << "pair " << p;
  }
  // A pair alone draws its token of the batch (within the GEMM-shape
  // tolerance): its noise is keyed by the pair, not by its place.
  const std::vector<float> alone =
      DeviceTokens({cond.begin() + C, cond.begin() + 2 * C}, {uncond.begin() + C, uncond.begin() + 2 * C},
                   {sampling[1]}, {tokens[1]});
  ASSERT_EQ(alone.size(), static_cast<size_t>(D));
  EXPECT_LE(RowError(alone.data(), got.data() + D, D), kTokenTolerance);
}

TEST_F(CudaFlowHeadTest, MoreThanOneChunkOfPairs) {
  const int32_t C = device_->cond_dim(), D = device_->token_dim();
  const int32_t pairs = DeviceFlowHead::kChunkPairs + 3;
  std::vector<model::SamplingSpec> sampling(pairs);
  std::vector<int32_t> tokens(pairs);
  for (int32_t p = 0; p < pairs; ++p) {
    sampling[p].cfg_weight = 2.0f + 0.01f * p;
    sampling[p].seed = 17;
    sampling[p].image_index = p;
    tokens[p] = p % 9;
  }
  const std::vector<float> cond = Values(static_cast<size_t>(pairs) * C, 5, 1.0f),
                           uncond = Values(static_cast<size_t>(pairs) * C, 6, 1.0f);
  std::vector<float> want(static_cast<size_t>(pairs) * D);
  ASSERT_TRUE(cpu_->Draw(cond, uncond, sampling, tokens, want).ok());
  const std::vector<float> got = DeviceTokens(cond, uncond, sampling, tokens);
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  for (int32_t p = 0; p < pairs; ++p) {
    const double e = RowError(got.data() + p * D, want.data() + p * D, D);
    worst = std::max(worst, e);
    EXPECT_LE(e, kTokenTolerance) << "pair " << p;
  }
  std::cout << pairs << " pairs: worst token error " << worst << "\n";
}

// The published head's shape (width 1,536, 12 blocks, 64-dim tokens) with
// random weights, where the tiny head above (32 wide) cannot reach: the
// default's GEMMs (the fused kernels up to kFusedMaxRows rows, cuBLAS above)
// and the fused kernels at every row count give cuBLAS's velocity to within
// their bf16 roundings, at 2 (one row of 16-row tiles), 24 (two rows of
// them), 40, 128 and 300 rows (a 256-row chunk, then 44).
TEST(CudaFlowHeadPublishedShapeTest, EveryGemmTuningAgrees) {
  const int32_t W = 1536, D = 64, C = 128, B = 12;
  std::vector<std::vector<float>> store;
  store.reserve(128);  // the spans below point into these
  uint32_t seed = 100;
  const auto values = [&](size_t n, float center, float scale) -> std::span<const float> {
    std::vector<float> v = Values(n, seed++, scale);
    for (float& e : v) e += center;
    store.push_back(std::move(v));
    return store.back();
  };
  const float s_w = 1.0f / std::sqrt(static_cast<float>(W));
  model::FlowMatchingHeadDesc desc;
  desc.token_dim = D;
  desc.cond_dim = C;
  desc.width = W;
  desc.cond_embed = {values(size_t{W} * C, 0, 1.0f / std::sqrt(static_cast<float>(C))), values(W, 0, 0.1f), W, C};
  desc.input_proj = {values(size_t{W} * D, 0, 1.0f / std::sqrt(static_cast<float>(D))), values(W, 0, 0.1f), W, D};
  desc.blocks.resize(B);
  for (model::FlowMatchingHeadDesc::Block& blk : desc.blocks) {
    blk.ln_weight = values(W, 1.0f, 0.2f);
    blk.ln_bias = values(W, 0, 0.1f);
    blk.fc1 = {values(size_t{W} * W, 0, s_w), values(W, 0, 0.1f), W, W};
    blk.fc2 = {values(size_t{W} * W, 0, s_w), values(W, 0, 0.1f), W, W};
    blk.ada = {values(size_t{3} * W * W, 0, 0.3f * s_w), values(size_t{3} * W, 0, 0.1f), 3 * W, W};
  }
  desc.final_ada = {values(size_t{2} * W * W, 0, 0.3f * s_w), values(size_t{2} * W, 0, 0.1f), 2 * W, W};
  desc.final_linear = {values(size_t{D} * W, 0, s_w), values(D, 0, 0.1f), D, W};
  desc.times = {0.0f, 0.5f};
  std::vector<float> temb(size_t{2} * W);
  for (size_t i = 0; i < temb.size(); ++i) temb[i] = std::sin(0.01f * static_cast<float>(i));
  desc.time_embeddings = temb;
  desc.last_step_size = 0.02f;
  desc.time_embedding = [W](float t, float* out) {
    for (int32_t i = 0; i < W; ++i) out[i] = std::sin(t * 0.013f * static_cast<float>(i + 1));
  };
  absl::StatusOr<std::unique_ptr<DeviceFlowHead>> head = DeviceFlowHead::Create(desc);
  ASSERT_TRUE(head.ok()) << head.status();
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  Gemm gemm;
  ASSERT_TRUE(gemm.Init(stream).ok());
  using Gemms = FlowHeadTuning::Gemms;
  for (const int32_t n : {2, 24, 40, 128, 300}) {
    const std::vector<float> x = Values(static_cast<size_t>(n) * D, 11, 1.5f),
                             c = Values(static_cast<size_t>(n) * C, 12, 1.0f);
    std::vector<float> want(static_cast<size_t>(n) * D), got(want.size());
    for (const float t : {0.1f, 0.8f}) {
      (*head)->set_tuning({Gemms::kCublas, FlowHeadTuning::Modulations::kGrouped});
      ASSERT_TRUE((*head)->Velocity(gemm, stream, x.data(), t, c.data(), n, want.data()).ok());
      double scale = 0;
      for (const float v : want) scale = std::max(scale, double{std::fabs(v)});
      EXPECT_GT(scale, 0.1) << "a velocity of zeros would match anything";
      for (const Gemms gemms : {Gemms::kAuto, Gemms::kFused}) {
        (*head)->set_tuning({gemms, FlowHeadTuning::Modulations::kGrouped});
        ASSERT_TRUE((*head)->Velocity(gemm, stream, x.data(), t, c.data(), n, got.data()).ok());
        double worst = 0;
        for (int32_t r = 0; r < n; ++r) worst = std::max(worst, RowError(got.data() + r * D, want.data() + r * D, D));
        std::cout << n << " rows, t " << t << ", gemms " << static_cast<int>(gemms)
                  << " against cuBLAS: worst relative row error " << worst << " (largest |v| " << scale << ")\n";
        EXPECT_LE(worst, kVelocityTolerance) << n << " rows, t " << t << ", gemms " << static_cast<int>(gemms);
      }
    }
  }
  gemm.Reset();
  cudaStreamDestroy(stream);
}

TEST(CudaFlowHeadShapeTest, AMisshapenDescriptionIsRefusedNamingTheTensor) {
  std::vector<float> w(6, 0.f), b(3, 0.f);
  model::FlowMatchingHeadDesc desc;
  desc.token_dim = 2;
  desc.cond_dim = 2;
  desc.width = 3;
  desc.cond_embed = {w, b, 3, 2};
  desc.input_proj = {w, b, 3, 2};
  desc.blocks.resize(1);
  absl::StatusOr<std::unique_ptr<DeviceFlowHead>> head = DeviceFlowHead::Create(desc);
  EXPECT_EQ(head.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(head.status().message().find("res_blocks.0.in_ln.weight"), std::string::npos) << head.status();
}

// Every way the head can run its GEMMs and its modulations (FlowHeadTuning)
// draws the CPU's tokens, with few rows (the warp-per-column kernel) and many
// (tiles or cuBLAS); the modulations made on the side stream or in line give
// bitwise the same tokens (the same GEMM each step); grouped ones come from a
// GEMM of more rows (its own accumulation order): within the tolerance.
TEST_F(CudaFlowHeadTest, EveryTuningDrawsTheCpuTokens) {
  const int32_t C = device_->cond_dim(), D = device_->token_dim();
  using Gemms = FlowHeadTuning::Gemms;
  using Modulations = FlowHeadTuning::Modulations;
  for (const int32_t pairs : {3, 20, 150}) {  // 150: two chunks, the second of 22 pairs
    std::vector<model::SamplingSpec> sampling(pairs);
    std::vector<int32_t> tokens(pairs);
    for (int32_t p = 0; p < pairs; ++p) {
      sampling[p].cfg_weight = 1.5f + 0.25f * (p % 8);
      sampling[p].seed = 23;
      sampling[p].image_index = p;
      tokens[p] = 2 * p;
    }
    const std::vector<float> cond = Values(static_cast<size_t>(pairs) * C, 7, 1.0f),
                             uncond = Values(static_cast<size_t>(pairs) * C, 8, 1.0f);
    std::vector<float> want(static_cast<size_t>(pairs) * D);
    ASSERT_TRUE(cpu_->Draw(cond, uncond, sampling, tokens, want).ok());
    for (const Gemms gemms : {Gemms::kAuto, Gemms::kFused, Gemms::kCublas}) {
      if (pairs > 20 && gemms != Gemms::kAuto) continue;  // the big batch: the default GEMMs only
      std::vector<float> side;
      for (const Modulations modulations : {Modulations::kGrouped, Modulations::kSide, Modulations::kInline}) {
        device_->set_tuning({gemms, modulations});
        const std::vector<float> got = DeviceTokens(cond, uncond, sampling, tokens);
        ASSERT_EQ(got.size(), want.size());
        double worst = 0;
        for (int32_t p = 0; p < pairs; ++p)
          worst = std::max(worst, RowError(got.data() + p * D, want.data() + p * D, D));
        std::cout << pairs << " pairs, gemms " << static_cast<int>(gemms) << ", modulations "
                  << static_cast<int>(modulations) << ": worst token error " << worst << "\n";
        EXPECT_LE(worst, kTokenTolerance) << pairs << " pairs, gemms " << static_cast<int>(gemms) << ", modulations "
                                          << static_cast<int>(modulations);
        if (modulations == Modulations::kSide) {
          side = got;
        } else if (modulations == Modulations::kInline) {
          EXPECT_EQ(0, std::memcmp(side.data(), got.data(), got.size() * sizeof(float)))
              << "side-stream modulations changed the tokens";
        }
      }
    }
  }
  device_->set_tuning({});
}

}  // namespace
}  // namespace argen::cuda
