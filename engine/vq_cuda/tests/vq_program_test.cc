// The bf16 path's program (vq_program.h) replayed on the host against the CPU
// decoder, with no GPU: in fp32 (exact weights, no storage rounding) it must
// equal vq::VqDecoder up to summation order, which checks the NHWC layouts,
// the KRSC filters, the fused q|k|v, every GEMM's arguments and the pending
// biases; with bf16 storage rounding it estimates what the GPU bf16 path
// gives (the GPU test, cuda_vq_decoder_test, bounds the real one the same way).
// Also: bf16 rounding, the batch ladder, and the layouts the path refuses.
#include "engine/vq_cuda/vq_program.h"

#include <cmath>
#include <cstdint>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/families/janus/janus_config.h"
#include "engine/vq/vq_config.h"
#include "engine/vq/vq_decoder.h"
#include "engine/vq/vq_weights.h"
#include "engine/vq_cuda/tests/vq_test_util.h"
#include "engine/vq_cuda/vq_program_host.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace argen::vq {
namespace {

using testing::ComparePixels;
using testing::PixelError;
using testing::RandomCheckpoint;
using testing::RandomGrids;

// fp32 replay: relative to max(1, |cpu|), as the fp32 GPU path's bound.
constexpr double kExactTol = 1e-4;
// bf16 emulation against the fp32 CPU decoder (measured here: see the test output).
constexpr double kBf16MinPsnrDb = 35.0;
constexpr int kBf16MaxLevels = 24;

std::string SourceDir() {
  const char* dir = std::getenv("ARGEN_SOURCE_DIR");
  return dir ? dir : ".";
}

TEST(Bf16BitsTest, RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16Bits(1.0f), 0x3f80);
  EXPECT_EQ(Bf16BitsToFloat(0x3f80), 1.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1).
  EXPECT_EQ(FloatToBf16Bits(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: ties to even (1 + 2^-6).
  EXPECT_EQ(FloatToBf16Bits(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(FloatToBf16Bits(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_EQ(FloatToBf16Bits(-2.5f), 0xc020);
  EXPECT_EQ(FloatToBf16Bits(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_TRUE(std::isnan(Bf16BitsToFloat(FloatToBf16Bits(std::nanf("")))));
  for (float x : {0.1f, -3.7f, 1e-20f, 6.5e4f, 123.456f}) {
    const float r = Bf16BitsToFloat(FloatToBf16Bits(x));
    EXPECT_LE(std::abs(r - x), std::abs(x) * std::ldexp(1.0f, -8)) << x;
  }
}

TEST(VqLadderTest, PowersOfTwoAndTheChunk) {
  EXPECT_EQ(VqLadder(1), (std::vector<int32_t>{1}));
  EXPECT_EQ(VqLadder(8), (std::vector<int32_t>{1, 2, 4, 8}));
  EXPECT_EQ(VqLadder(24), (std::vector<int32_t>{1, 2, 4, 8, 16, 24}));
  const auto ladder = VqLadder(24);
  EXPECT_EQ(VqPieces(0, ladder).size(), 0u);
  EXPECT_EQ(VqPieces(37, ladder), (std::vector<std::pair<int32_t, int32_t>>{{0, 24}, {24, 8}, {32, 4}, {36, 1}}));
  EXPECT_EQ(VqPieces(50, ladder), (std::vector<std::pair<int32_t, int32_t>>{{0, 24}, {24, 24}, {48, 2}}));
  for (int32_t n = 1; n <= 100; ++n) {
    int32_t covered = 0;
    for (auto [first, size] : VqPieces(n, ladder)) {
      EXPECT_EQ(first, covered);
      EXPECT_NE(std::find(ladder.begin(), ladder.end(), size), ladder.end());
      covered += size;
    }
    EXPECT_EQ(covered, n);
  }
}

struct Decoders {
  VqDecoderWeights weights;
  std::unique_ptr<VqDecoder> cpu;
};

Decoders Load(const checkpoint::Checkpoint& ckpt, const vq::Vq16Config& config) {
  Decoders d;
  auto w = LoadVqDecoderWeights(ckpt, config);
  EXPECT_TRUE(w.ok()) << w.status();
  if (!w.ok()) return d;
  d.weights = *w;
  auto cpu = VqDecoder::Create(std::move(*w), config, 1);
  EXPECT_TRUE(cpu.ok()) << cpu.status();
  if (cpu.ok()) d.cpu = std::move(*cpu);
  return d;
}

// The program replayed exactly (fp32) and with bf16 storage, against the CPU decoder.
void CheckProgram(const checkpoint::Checkpoint& ckpt, const vq::Vq16Config& config,
                  const std::vector<std::vector<int32_t>>& grids, const std::string& what) {
  Decoders d = Load(ckpt, config);
  ASSERT_NE(d.cpu, nullptr);
  auto program = VqProgram::Build(d.weights, config, /*keep_exact_weights=*/true);
  ASSERT_TRUE(program.ok()) << program.status();
  std::vector<std::vector<float>> want(grids.size());
  for (size_t i = 0; i < grids.size(); ++i) ASSERT_TRUE(d.cpu->DecodeToFloat(grids[i], &want[i]).ok());

  HostVqExecutor exact(*program, static_cast<int32_t>(grids.size()), /*round_to_bf16=*/false);
  std::vector<std::vector<float>> got;
  ASSERT_TRUE(exact.Decode(grids, &got).ok());
  double max_rel = 0;
  for (size_t i = 0; i < grids.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size());
    for (size_t p = 0; p < want[i].size(); ++p)
      max_rel =
          std::max(max_rel, std::abs(double{got[i][p]} - want[i][p]) / std::max(1.0, std::abs(double{want[i][p]})));
  }
  std::cout << what << ": fp32 replay max relative error " << max_rel << "\n";
  EXPECT_LE(max_rel, kExactTol) << what;

  HostVqExecutor bf16(*program, static_cast<int32_t>(grids.size()), /*round_to_bf16=*/true);
  ASSERT_TRUE(bf16.Decode(grids, &got).ok());
  const PixelError e = ComparePixels(got, want, config.image_size);
  std::cout << what << ": bf16 emulation vs CPU: " << e.Describe() << "\n";
  EXPECT_GE(e.psnr_db, kBf16MinPsnrDb) << what;
  EXPECT_LE(e.max_level, kBf16MaxLevels) << what;
  EXPECT_GT(e.max_float, 0.0) << what << ": rounding had no effect (the emulation is not rounding)";
}

class GoldenProgramTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenProgramTest, MatchesCpuDecoder) {
  const std::string dir = SourceDir() + "/tests/goldens/tiny/" + GetParam();
  auto ckpt = checkpoint::Checkpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto config = janus::LoadJanusConfig(dir);
  ASSERT_TRUE(config.ok()) << config.status();
  CheckProgram(**ckpt, config->gen_vision, RandomGrids(config->gen_vision, 3, 11), GetParam());
}

INSTANTIATE_TEST_SUITE_P(TinyCheckpoints, GoldenProgramTest, ::testing::Values("tiny-mha", "tiny-gqa-sharded"),
                         [](const auto& info) { return info.param == "tiny-mha" ? "Mha" : "GqaSharded"; });

TEST(ShippedProgramTest, MatchesCpuDecoder) {
  const std::string dir = SourceDir() + "/models/argen-scenes-v1";
  auto ckpt = checkpoint::Checkpoint::Open(dir);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  auto config = janus::LoadJanusConfig(dir);
  ASSERT_TRUE(config.ok()) << config.status();
  CheckProgram(**ckpt, config->gen_vision, RandomGrids(config->gen_vision, 1, 12), "shipped");
}

// A small VQ-16 of Janus' structure (ch_mult 1,1,2,2,4: nin shortcuts, attention
// at the lowest level) with random biases and affines, so every pending-bias
// path is non-trivial.
TEST(RandomProgramTest, JanusStructureWithBiases) {
  vq::Vq16Config config;
  config.ch = 32;
  config.z_channels = 64;
  config.codebook_size = 512;
  config.image_size = 64;  // 4 x 4 tokens
  RandomCheckpoint ckpt;
  CheckProgram(ckpt, config, RandomGrids(config, 2, 13), "random janus-structure");
}

TEST(VqProgramTest, RefusesLayoutsTheKernelsCannotRun) {
  RandomCheckpoint ckpt;
  vq::Vq16Config config;
  config.ch = 32;
  config.ch_mult = {1, 2};
  config.codebook_size = 64;
  config.image_size = 16;
  config.z_channels = 12;
  auto w = LoadVqDecoderWeights(ckpt, config);
  ASSERT_TRUE(w.ok()) << w.status();
  auto p = VqProgram::Build(*w, config);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(p.status().message().find("post_quant_conv output has 12 channels"), std::string::npos) << p.status();

  config.z_channels = 64;
  config.ch = 512;
  config.ch_mult = {1};
  config.image_size = 4;
  w = LoadVqDecoderWeights(ckpt, config);
  ASSERT_TRUE(w.ok()) << w.status();
  p = VqProgram::Build(*w, config);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(p.status().message().find("conv_out"), std::string::npos) << p.status();
}

TEST(VqProgramTest, JanusShapeSizes) {
  // The official shape's buffers (per image) and its distinct 3x3 conv shapes.
  vq::Vq16Config config;
  RandomCheckpoint ckpt(/*random_affine=*/false);
  auto w = LoadVqDecoderWeights(ckpt, config);
  ASSERT_TRUE(w.ok()) << w.status();
  auto p = VqProgram::Build(*w, config);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->act_elems(), int64_t{128} * 384 * 384);
  EXPECT_EQ(p->qkv_elems(), int64_t{3} * 512 * 576);
  EXPECT_EQ(p->score_elems(), int64_t{576} * 576);
  EXPECT_EQ(p->cells(), 576);
  EXPECT_EQ(p->conv_shapes().size(), 10u);
  int convs = 0, attn = 0, norms = 0, linears = 0;
  for (const VqOp& op : p->ops()) {
    convs += op.kind == VqOpKind::kConv3x3;
    attn += op.kind == VqOpKind::kAttention;
    norms += op.kind == VqOpKind::kGroupNorm;
    linears += op.kind == VqOpKind::kLinear;
  }
  EXPECT_EQ(convs, 1 + 2 * 2 + 5 * 3 * 2 + 4);  // conv_in, mid, 15 res blocks, 4 upsample convs
  EXPECT_EQ(attn, 1 + 3);
  EXPECT_EQ(norms, 2 * 2 + 15 * 2 + 4 + 1);
  EXPECT_EQ(linears, 2);  // nin shortcuts 512 -> 256, 256 -> 128
}

}  // namespace
}  // namespace argen::vq
