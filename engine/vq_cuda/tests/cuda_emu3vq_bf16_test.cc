// Emu3's GPU vision decoder on its bf16 path (CudaEmu3VqOptions::precision =
// kBf16, bf16_emu3vq_network.h) against the fp32 CPU decoder: the tiny random
// tokenizer in both namings (mixed grid sizes in one call, chunks smaller
// than the call), random weights at the published tokenizer's shape, the
// fallback to fp32 where the path cannot run, and the CPU's error messages.
// Needs a GPU (label gpu); prints every measured figure.
//
// Metrics (as the other Emu3 decoder tests, plus cuda_vq_bf16_test's): the
// per-pixel float error |gpu - cpu| / max(1, |cpu|), its max and RMS; over
// the RGB8 bytes of the official conversion the max and mean level
// difference and the PSNR.
//
// Bounds come from tools/goldens/emu3_bf16_sensitivity.py, which decodes the
// same grids with transformers' Emu3VQVAE in fp32 and with the bf16 path's
// roundings emulated (every conv / matmul operand and every stored activation
// in bf16; SpatialNorm's conditions, the attention scores and conv_out in
// fp32). The tiny random tokenizer is badly conditioned (activations ~2,800,
// outputs to ~120, attention logits ~86: the TF32 case's header in
// cuda_emu3vq_decoder_test.cc), so bf16 moves some of its pixels far:
// emulated on this test's grids together max 2.94, RMS 0.102, mean 1.62
// levels, PSNR 30.1 dB, max 255 levels (one 8 x 8 grid's saturated pixels;
// over 100 random 4 x 6 grids the max level is 22 ... 255, PSNR 24.6 ...
// 41.4 dB). So on the tiny tokenizer the mean, RMS and PSNR carry the check
// (about 2.5x / 6 dB of margin for the GPU's other summation orders and
// cuDNN's algorithms), the max is bounded only loosely, and the max level is
// printed, not bounded. A layout or indexing bug gives garbage: RMS ~1,
// PSNR ~10 dB. At the published shape (random weights drawn as RandomSource,
// outputs ~0.3) the emulation gives max 0.004, RMS 3.2e-4 ... 3.7e-4, max 1
// level, 63 dB over two weight draws; bounded with 5x / 13 dB of margin.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/emu3vq/emu3vq_config.h"
#include "engine/emu3vq/emu3vq_decoder.h"
#include "engine/emu3vq/emu3vq_weights.h"
#include "engine/vq/pixels.h"
#include "engine/vq_cuda/cuda_emu3vq_decoder.h"
#include "engine/vq_cuda/tests/emu3vq_test_util.h"
#include "engine/vq_cuda/tests/vq_test_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace argen::vq {
namespace {

using emu3vq::CodeGrid;
using emu3vq::Emu3VqConfig;
using emu3vq::Emu3VqDecoder;
using emu3vq::Emu3VqNaming;
using emu3vq::Emu3VqWeights;
using test_support::ReadJson;
using testing::LoadTiny;
using testing::PixelError;
using testing::RandomGrid;
using testing::RandomSource;
using testing::Tiny;

struct Bounds {
  double max_rel, rms_rel, mean_level, min_psnr_db;
  int max_level;  // 255: not bounded
};
// Emulated: max 2.94, RMS 0.102, mean 1.62 levels, 30.1 dB, max 255 levels (header).
constexpr Bounds kTinyBounds{8.0, 0.25, 4.0, 24.0, 255};
// Emulated: max 0.004, RMS <= 3.7e-4, 1 level, 63 dB.
constexpr Bounds kShapeBounds{0.02, 2e-3, 0.2, 50.0, 4};

CudaEmu3VqOptions Bf16(int32_t chunk) {
  CudaEmu3VqOptions o;
  o.precision = VqPrecision::kBf16;
  o.fallback_to_fp32 = false;  // a bf16 test must run bf16
  o.max_images_per_chunk = chunk;
  return o;
}

struct Measured {
  PixelError pixels;
  double max_rel = 0, rms_rel = 0;
};

// The bf16 decoder's floats (and RGB8 bytes, which must be the official
// conversion of those floats) against the CPU decoder's floats.
Measured CheckAgainstCpu(Emu3VqDecoder& cpu, CudaEmu3VqDecoder& gpu, const std::vector<CodeGrid>& grids,
                         const Bounds& bounds, const std::string& what) {
  Measured m;
  EXPECT_EQ(gpu.precision(), VqPrecision::kBf16) << what;
  std::vector<std::vector<float>> got;
  absl::Status st = gpu.DecodeToFloat(grids, &got);
  EXPECT_TRUE(st.ok()) << what << ": " << st;
  absl::StatusOr<std::vector<engine::RgbImage>> rgb = gpu.Decode(grids);
  EXPECT_TRUE(rgb.ok()) << what << ": " << rgb.status();
  if (!st.ok() || !rgb.ok() || got.size() != grids.size() || rgb->size() != grids.size()) {
    ADD_FAILURE() << what << ": no result";
    return m;
  }
  const int32_t f = cpu.config().spatial_factor();
  std::vector<std::vector<float>> want(grids.size());
  std::vector<std::pair<int32_t, int32_t>> sizes;
  double sum_squares = 0;
  size_t count = 0;
  for (size_t i = 0; i < grids.size(); ++i) {
    const int32_t h = grids[i].height * f, w = grids[i].width * f;
    sizes.emplace_back(h, w);
    EXPECT_TRUE(cpu.DecodeToFloat(grids[i], &want[i]).ok());
    EXPECT_EQ(got[i].size(), want[i].size()) << what << ", grid " << i;
    for (size_t p = 0; p < want[i].size() && p < got[i].size(); ++p) {
      const double err = std::abs(double{got[i][p]} - want[i][p]) / std::max(1.0, std::abs(double{want[i][p]}));
      m.max_rel = std::isnan(err) ? INFINITY : std::max(m.max_rel, err);
      sum_squares += err * err;
    }
    count += want[i].size();
    // Decode's bytes are ChwToRgb8 of DecodeToFloat's floats (the same device output).
    std::vector<uint8_t> bytes(3 * static_cast<size_t>(h) * w);
    if (got[i].size() == bytes.size()) ChwToRgb8(got[i].data(), h, w, bytes.data());
    EXPECT_EQ((*rgb)[i].rgb, bytes) << what << ", grid " << i;
    EXPECT_EQ((*rgb)[i].width, w) << what << ", grid " << i;
    EXPECT_EQ((*rgb)[i].height, h) << what << ", grid " << i;
  }
  if (count > 0) m.rms_rel = std::sqrt(sum_squares / static_cast<double>(count));
  m.pixels = testing::ComparePixels(got, want, sizes);
  std::cout << what << ": bf16 GPU vs CPU: relative float error max " << m.max_rel << ", rms " << m.rms_rel << "; "
            << m.pixels.Describe() << "\n";
  EXPECT_LE(m.max_rel, bounds.max_rel) << what;
  EXPECT_LE(m.rms_rel, bounds.rms_rel) << what;
  EXPECT_LE(m.pixels.mean_level, bounds.mean_level) << what;
  EXPECT_GE(m.pixels.psnr_db, bounds.min_psnr_db) << what;
  EXPECT_LE(m.pixels.max_level, bounds.max_level) << what;
  EXPECT_GT(m.pixels.bytes, 0u) << what;
  return m;
}

class CudaEmu3VqBf16TinyTest : public ::testing::TestWithParam<Emu3VqNaming> {};

TEST_P(CudaEmu3VqBf16TinyTest, MatchesTheCpuDecoder) {
  Tiny t = LoadTiny(GetParam());
  ASSERT_FALSE(t.weights.codebook.empty());
  constexpr int32_t kMaxCells = 64;
  absl::StatusOr<std::unique_ptr<Emu3VqDecoder>> cpu = Emu3VqDecoder::Create(t.weights, t.config, kMaxCells, 1);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  // The golden grid (3 x 5) and the sizes emu3_bf16_sensitivity.py emulates, a size twice.
  const nlohmann::json px = ReadJson("tests/goldens/tiny/emu3-goldens/goldens.json")["pixels"];
  std::vector<CodeGrid> grids = {
      {px["height"].get<int32_t>(), px["width"].get<int32_t>(), px["codes"].get<std::vector<int32_t>>()}};
  const int32_t sizes[][3] = {{5, 3, 1}, {3, 5, 2}, {8, 8, 3}, {1, 1, 4}, {2, 7, 5}};
  for (const auto& [h, w, seed] : sizes) grids.push_back(RandomGrid(h, w, t.config.codebook_size, seed));
  // Chunk 16: the call's two 3 x 5 grids in one ladder piece; chunk 1: every grid alone.
  for (int32_t chunk : {16, 1}) {
    const std::string what =
        absl::StrCat("tiny ", GetParam() == Emu3VqNaming::kBaai ? "BAAI" : "HF", ", chunk ", chunk);
    absl::StatusOr<std::unique_ptr<CudaEmu3VqDecoder>> gpu =
        CudaEmu3VqDecoder::Create(t.weights, t.config, kMaxCells, Bf16(chunk));
    ASSERT_TRUE(gpu.ok()) << gpu.status();
    EXPECT_EQ((*gpu)->chunk_images(), chunk);
    CheckAgainstCpu(**cpu, **gpu, grids, kTinyBounds, what);
    std::cout << (*gpu)->description() << "\n";
  }

  // Five same-size grids through chunk 3 (ladder 1, 2, 3: pieces 3 + 2, then 3 ... in two chunks).
  std::vector<CodeGrid> same;
  for (uint32_t seed = 11; seed < 16; ++seed) same.push_back(RandomGrid(4, 6, t.config.codebook_size, seed));
  absl::StatusOr<std::unique_ptr<CudaEmu3VqDecoder>> three =
      CudaEmu3VqDecoder::Create(t.weights, t.config, kMaxCells, Bf16(3));
  ASSERT_TRUE(three.ok()) << three.status();
  CheckAgainstCpu(**cpu, **three, same, kTinyBounds, "tiny, five 4 x 6 grids, chunk 3");

  // Bad grids: the CPU decoder's status, word for word.
  std::vector<CodeGrid> bad = grids;
  bad[2].codes[4] = t.config.codebook_size;
  EXPECT_EQ((*three)->Decode(bad).status(), (*cpu)->Decode(bad).status());
  bad = grids;
  bad[1] = RandomGrid(9, 8, t.config.codebook_size, 99);  // 72 cells > kMaxCells
  EXPECT_FALSE((*three)->Decode(bad).ok());
  EXPECT_EQ((*three)->Decode(bad).status(), (*cpu)->Decode(bad).status());
}

TEST_P(CudaEmu3VqBf16TinyTest, PlanGridsAtCreate) {
  Tiny t = LoadTiny(GetParam());
  ASSERT_FALSE(t.weights.codebook.empty());
  CudaEmu3VqOptions o = Bf16(4);
  o.plan_grids = {{4, 6}, {8, 8}};
  absl::StatusOr<std::unique_ptr<CudaEmu3VqDecoder>> gpu = CudaEmu3VqDecoder::Create(t.weights, t.config, 64, o);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_NE((*gpu)->description().find("grid sizes planned 2"), std::string::npos) << (*gpu)->description();
  o.plan_grids = {{9, 8}};  // 72 cells > max_cells
  absl::StatusOr<std::unique_ptr<CudaEmu3VqDecoder>> bad = CudaEmu3VqDecoder::Create(t.weights, t.config, 64, o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument) << bad.status();
  EXPECT_NE(bad.status().message().find("plan_grids"), std::string::npos) << bad.status();
}

INSTANTIATE_TEST_SUITE_P(Namings, CudaEmu3VqBf16TinyTest,
                         ::testing::Values(Emu3VqNaming::kTransformers, Emu3VqNaming::kBaai),
                         [](const ::testing::TestParamInfo<Emu3VqNaming>& p) {
                           return p.param == Emu3VqNaming::kBaai ? std::string("Baai") : std::string("Transformers");
                         });

TEST(CudaEmu3VqBf16ShapeTest, PublishedShapeWithRandomWeightsMatchesTheCpuDecoder) {
  const Emu3VqConfig config;  // the published tokenizer's decoder
  absl::StatusOr<Emu3VqWeights> w = emu3vq::LoadEmu3VqWeights(RandomSource(2026), config, Emu3VqNaming::kBaai, "");
  ASSERT_TRUE(w.ok()) << w.status();
  constexpr int32_t kMaxCells = 80;
  absl::StatusOr<std::unique_ptr<CudaEmu3VqDecoder>> gpu = CudaEmu3VqDecoder::Create(*w, config, kMaxCells, Bf16(16));
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  std::cout << (*gpu)->description() << "\n";
  absl::StatusOr<std::unique_ptr<Emu3VqDecoder>> cpu = Emu3VqDecoder::Create(*std::move(w), config, kMaxCells);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  // 64 x 80 px and 80 x 64 px: a non-square grid each way, two of one size together.
  const std::vector<CodeGrid> grids = {RandomGrid(8, 10, config.codebook_size, 1),
                                       RandomGrid(10, 8, config.codebook_size, 2),
                                       RandomGrid(8, 10, config.codebook_size, 3)};
  CheckAgainstCpu(**cpu, **gpu, grids, kShapeBounds, "published shape, random weights");
}

// conv_out wider than the NHWC kernel takes (480 > 448 channels): auto's
// fallback decodes in fp32 and says why; bf16 alone is FailedPrecondition.
TEST(CudaEmu3VqBf16FallbackTest, WideConvOutFallsBackOrFails) {
  Emu3VqConfig config;
  config.codebook_size = 16;
  config.ch = 480;
  config.ch_mult = {1};
  config.num_res_blocks = 1;
  config.attn_resolutions = {};
  ASSERT_TRUE(emu3vq::ValidateEmu3VqConfig(config, "wide").ok());
  absl::StatusOr<Emu3VqWeights> w = emu3vq::LoadEmu3VqWeights(RandomSource(7), config, Emu3VqNaming::kBaai, "");
  ASSERT_TRUE(w.ok()) << w.status();
  absl::StatusOr<std::unique_ptr<CudaEmu3VqDecoder>> strict = CudaEmu3VqDecoder::Create(*w, config, 16, Bf16(2));
  ASSERT_FALSE(strict.ok());
  EXPECT_EQ(strict.status().code(), absl::StatusCode::kFailedPrecondition) << strict.status();
  EXPECT_NE(strict.status().message().find("conv_out"), std::string::npos) << strict.status();

  CudaEmu3VqOptions fallback = Bf16(2);
  fallback.fallback_to_fp32 = true;
  absl::StatusOr<std::unique_ptr<CudaEmu3VqDecoder>> gpu = CudaEmu3VqDecoder::Create(*w, config, 16, fallback);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ((*gpu)->precision(), VqPrecision::kFp32);
  EXPECT_NE((*gpu)->fallback_reason().find("conv_out"), std::string::npos) << (*gpu)->fallback_reason();
  EXPECT_NE((*gpu)->description().find("bf16 fell back"), std::string::npos) << (*gpu)->description();
  absl::StatusOr<std::unique_ptr<Emu3VqDecoder>> cpu = Emu3VqDecoder::Create(*std::move(w), config, 16);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  const std::vector<CodeGrid> grids = {RandomGrid(3, 4, config.codebook_size, 1)};
  absl::StatusOr<std::vector<engine::RgbImage>> got = (*gpu)->Decode(grids);
  absl::StatusOr<std::vector<engine::RgbImage>> want = (*cpu)->Decode(grids);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ((*got)[0].rgb.size(), (*want)[0].rgb.size());
  for (size_t p = 0; p < (*want)[0].rgb.size(); ++p)
    ASSERT_LE(std::abs(int{(*got)[0].rgb[p]} - int{(*want)[0].rgb[p]}), 1) << p;  // fp32: the fp32 test's bound
}

}  // namespace
}  // namespace argen::vq
