// Emu3's GPU vision decoder (CudaEmu3VqDecoder) against the CPU one
// (emu3vq::Emu3VqDecoder, itself checked against transformers' Emu3VQVAE in
// engine/emu3vq/tests): the tiny random vision tokenizer committed in both
// namings (tests/goldens/tiny/tiny-emu3-gen/vision_tokenizer, BAAI's;
// tiny-emu3-gen-hf, transformers'), grids of mixed sizes in one call, chunks
// smaller than the call, TF32, the CPU's error messages, and random weights
// at the published tokenizer's shape (ch 256, ch_mult 1 2 2 4, two ResNets a
// level, 1,024-channel attention at the lowest level, 32,768 codes). Needs a
// GPU (label gpu) and only files in the repository.
//
// Bounds (fp32): floats within kFloatTol of the CPU relative to max(1, |cpu|)
// (the same computation in another summation order); RGB8 bytes within 1
// level, at most 0.5% of them off by one (a float within rounding of an
// integer boundary truncates to its neighbour; 2% at the published shape);
// the PyTorch golden of the tiny tokenizer within the CPU test's 1e-4
// (L2-relative). Measured on the H200 (2026-12-02): fp32 tiny 1.69e-4 (4 of
// 32,448 bytes one level off), published shape 8.5e-7; TF32 on the tiny
// tokenizer 0.164 (max).
//
// TF32 bounds come from tools/goldens/emu3_tf32_sensitivity.py, which decodes
// the TF32 case's grids on the CPU in fp32 and with both operands of every
// conv and matmul rounded to TF32 (what the decoder's TF32 mode changes: the
// cuBLAS math mode, nothing else). The tiny random tokenizer amplifies that
// rounding: its activations grow to ~2,800 and its output to ~114 (median
// 1.5), so an error proportional to the image's scale lands on pixels near 0
// where the metric divides by 1, and its attention logits reach 86 (sum
// |q k| / sqrt(c) ~ 330), where a TF32 logit error moves the softmax ~10x more
// than its input (emulated L2-relative error 1.7e-3 before, 1.8e-2 after the
// last attention). Emulated on these grids (nearest / truncating rounding):
// max 0.21 / 0.54, mean 4.3e-3 / 9.6e-3, rms 9.5e-3 / 2.1e-2; the bounds are
// about twice the truncating numbers. bf16 operands (3 bits fewer, as a
// precision bug would be) emulate max 2.1, mean 3.9e-2, rms 9.7e-2: over all
// three. The max alone swings with the grid (0.02 ... 1.7 over 100 random
// grids, nearest), so the mean and rms carry the precision check.
#include "engine/vq_cuda/cuda_emu3vq_decoder.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/emu3vq/emu3vq_config.h"
#include "engine/emu3vq/emu3vq_decoder.h"
#include "engine/emu3vq/emu3vq_weights.h"
#include "engine/vq/pixels.h"
#include "engine/vq_cuda/tests/emu3vq_test_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/golden_files.h"

namespace argen::vq {
namespace {

using emu3vq::CodeGrid;
using emu3vq::Emu3VqConfig;
using emu3vq::Emu3VqDecoder;
using emu3vq::Emu3VqNaming;
using emu3vq::Emu3VqWeights;
using test_support::ReadF32;
using test_support::ReadJson;
using test_support::RelativeError;
using test_support::SourceDir;
using testing::LoadTiny;
using testing::RandomGrid;
using testing::RandomSource;
using testing::Tiny;

constexpr double kFloatTol = 5e-4;       // fp32, relative to max(1, |cpu|) (measured 1.69e-4)
constexpr double kShapeFloatTol = 5e-4;  // fp32 through the published shape's ~40 layers
// TF32 GEMMs on the tiny tokenizer, the per-pixel error as kFloatTol's (header: why so large).
constexpr double kTf32MaxTol = 1.0;           // emulated 0.21 (nearest) / 0.54 (truncating); measured 0.164
constexpr double kTf32MeanTol = 2e-2;         // emulated 4.3e-3 / 9.6e-3
constexpr double kTf32RmsTol = 4e-2;          // emulated 9.5e-3 / 2.1e-2
constexpr double kOffByOneShare = 0.005;      // fp32: RGB8 bytes one level off
constexpr double kShapeOffByOneShare = 0.02;  // the same through the published shape's depth
constexpr double kGoldenTol = 1e-4;           // L2-relative against PyTorch, as the CPU test

struct Diff {
  double max_rel = 0;  // floats: max |gpu - cpu| / max(1, |cpu|)
  int max_byte = 0;    // RGB8: max |gpu - cpu|
  size_t off_by_one = 0, bytes = 0;
};

// The GPU decoder (floats, then RGB8, of the whole call) against the CPU one grid by grid.
Diff Compare(Emu3VqDecoder& cpu, CudaEmu3VqDecoder& gpu, const std::vector<CodeGrid>& grids) {
  Diff d;
  std::vector<std::vector<float>> gpu_float;
  absl::Status st = gpu.DecodeToFloat(grids, &gpu_float);
  EXPECT_TRUE(st.ok()) << st;
  absl::StatusOr<std::vector<engine::RgbImage>> gpu_rgb = gpu.Decode(grids);
  EXPECT_TRUE(gpu_rgb.ok()) << gpu_rgb.status();
  absl::StatusOr<std::vector<engine::RgbImage>> cpu_rgb = cpu.Decode(grids);
  EXPECT_TRUE(cpu_rgb.ok()) << cpu_rgb.status();
  if (!st.ok() || !gpu_rgb.ok() || !cpu_rgb.ok()) return d;
  EXPECT_EQ(gpu_float.size(), grids.size());
  EXPECT_EQ(gpu_rgb->size(), grids.size());
  std::vector<float> want;
  for (size_t i = 0; i < grids.size() && i < gpu_float.size() && i < gpu_rgb->size(); ++i) {
    EXPECT_TRUE(cpu.DecodeToFloat(grids[i], &want).ok());
    EXPECT_EQ(gpu_float[i].size(), want.size()) << "grid " << i;
    for (size_t p = 0; p < want.size() && p < gpu_float[i].size(); ++p) {
      const double err = std::abs(double{gpu_float[i][p]} - want[p]) / std::max(1.0, std::abs(double{want[p]}));
      if (!(err <= d.max_rel)) d.max_rel = std::isnan(err) ? INFINITY : err;
    }
    const engine::RgbImage& g = (*gpu_rgb)[i];
    const engine::RgbImage& c = (*cpu_rgb)[i];
    EXPECT_EQ(g.width, c.width) << "grid " << i;
    EXPECT_EQ(g.height, c.height) << "grid " << i;
    EXPECT_EQ(g.rgb.size(), c.rgb.size()) << "grid " << i;
    for (size_t p = 0; p < c.rgb.size() && p < g.rgb.size(); ++p) {
      const int diff = std::abs(int{g.rgb[p]} - int{c.rgb[p]});
      d.max_byte = std::max(d.max_byte, diff);
      d.off_by_one += diff != 0;
    }
    d.bytes += c.rgb.size();
  }
  return d;
}

void ExpectClose(const Diff& d, double float_tol, double off_by_one_share, const std::string& what) {
  std::cout << what << ": max relative float error " << d.max_rel << ", max byte diff " << d.max_byte << ", "
            << d.off_by_one << " of " << d.bytes << " bytes off\n";
  EXPECT_LE(d.max_rel, float_tol) << what;
  EXPECT_LE(d.max_byte, 1) << what;
  EXPECT_LE(static_cast<double>(d.off_by_one), off_by_one_share * static_cast<double>(d.bytes)) << what;
}

class CudaEmu3VqTinyTest : public ::testing::TestWithParam<Emu3VqNaming> {};

TEST_P(CudaEmu3VqTinyTest, MatchesTheCpuDecoderAndPyTorch) {
  Tiny t = LoadTiny(GetParam());
  ASSERT_FALSE(t.weights.codebook.empty());
  constexpr int32_t kMaxCells = 64;
  CudaEmu3VqOptions small_chunks;
  small_chunks.max_images_per_chunk = 2;  // a call of five same-size grids runs three chunks
  absl::StatusOr<std::unique_ptr<CudaEmu3VqDecoder>> gpu =
      CudaEmu3VqDecoder::Create(t.weights, t.config, kMaxCells, small_chunks);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ((*gpu)->chunk_images(), 2);
  std::cout << (*gpu)->description() << "\n";
  absl::StatusOr<std::unique_ptr<Emu3VqDecoder>> cpu = Emu3VqDecoder::Create(t.weights, t.config, kMaxCells, 1);
  ASSERT_TRUE(cpu.ok()) << cpu.status();

  // The PyTorch golden grid (3 x 5 codes) first.
  const nlohmann::json px = ReadJson("tests/goldens/tiny/emu3-goldens/goldens.json")["pixels"];
  const CodeGrid golden{px["height"].get<int32_t>(), px["width"].get<int32_t>(),
                        px["codes"].get<std::vector<int32_t>>()};
  std::vector<std::vector<float>> out;
  ASSERT_TRUE((*gpu)->DecodeToFloat({golden}, &out).ok());
  const std::vector<float> expected =
      ReadF32(SourceDir() + "/tests/goldens/tiny/emu3-goldens/" + px["file"].get<std::string>());
  ASSERT_EQ(out.size(), 1u);
  ASSERT_EQ(out[0].size(), expected.size());
  EXPECT_LE(RelativeError(out[0].data(), expected), kGoldenTol);

  // Mixed sizes in one call (grouped by size on the device, back in call order), chunked.
  std::vector<CodeGrid> grids = {golden};
  const std::pair<int32_t, int32_t> sizes[] = {{5, 3}, {3, 5}, {8, 8}, {1, 1}, {3, 5}, {5, 3}, {3, 5}, {2, 7}};
  uint32_t seed = 1;
  for (const auto& [h, w] : sizes) grids.push_back(RandomGrid(h, w, t.config.codebook_size, seed++));
  ExpectClose(Compare(**cpu, **gpu, grids), kFloatTol, kOffByOneShare, "tiny, mixed sizes");

  // Bad grids: the CPU decoder's status, word for word, before anything decodes.
  std::vector<CodeGrid> bad = grids;
  bad[2].codes[4] = t.config.codebook_size;
  EXPECT_EQ((*gpu)->Decode(bad).status(), (*cpu)->Decode(bad).status());
  bad = grids;
  bad[1] = RandomGrid(9, 8, t.config.codebook_size, 99);  // 72 cells > kMaxCells
  EXPECT_EQ((*gpu)->Decode(bad).status(), (*cpu)->Decode(bad).status());
  EXPECT_FALSE((*gpu)->Decode(bad).ok());
  bad = grids;
  bad[3].codes.pop_back();
  EXPECT_EQ((*gpu)->Decode(bad).status(), (*cpu)->Decode(bad).status());
  EXPECT_FALSE((*gpu)->Decode(bad).ok());
  // An empty call is fine.
  absl::StatusOr<std::vector<engine::RgbImage>> none = (*gpu)->Decode({});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
}

TEST_P(CudaEmu3VqTinyTest, Tf32StaysWithinItsBound) {
  Tiny t = LoadTiny(GetParam());
  ASSERT_FALSE(t.weights.codebook.empty());
  CudaEmu3VqOptions tf32;
  tf32.precision = VqPrecision::kTf32;
  absl::StatusOr<std::unique_ptr<CudaEmu3VqDecoder>> gpu = CudaEmu3VqDecoder::Create(t.weights, t.config, 64, tf32);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  absl::StatusOr<std::unique_ptr<Emu3VqDecoder>> cpu = Emu3VqDecoder::Create(t.weights, t.config, 64, 1);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  const std::vector<CodeGrid> grids = {RandomGrid(4, 6, t.config.codebook_size, 7),
                                       RandomGrid(4, 6, t.config.codebook_size, 8)};
  std::vector<std::vector<float>> got;
  ASSERT_TRUE((*gpu)->DecodeToFloat(grids, &got).ok());
  ASSERT_EQ(got.size(), grids.size());
  double max_rel = 0, sum = 0, sum_squares = 0;
  size_t count = 0;
  std::vector<float> want;
  for (size_t i = 0; i < grids.size(); ++i) {
    ASSERT_TRUE((*cpu)->DecodeToFloat(grids[i], &want).ok());
    ASSERT_EQ(got[i].size(), want.size());
    for (size_t p = 0; p < want.size(); ++p) {
      const double err = std::abs(double{got[i][p]} - want[p]) / std::max(1.0, std::abs(double{want[p]}));
      max_rel = std::isnan(err) ? INFINITY : std::max(max_rel, err);
      sum += err;
      sum_squares += err * err;
    }
    count += want.size();
  }
  ASSERT_GT(count, 0u);
  const double mean = sum / static_cast<double>(count);
  const double rms = std::sqrt(sum_squares / static_cast<double>(count));
  std::cout << "tf32: max relative float error " << max_rel << ", mean " << mean << ", rms " << rms << "\n";
  EXPECT_LE(max_rel, kTf32MaxTol);
  EXPECT_LE(mean, kTf32MeanTol);
  EXPECT_LE(rms, kTf32RmsTol);
}

INSTANTIATE_TEST_SUITE_P(Namings, CudaEmu3VqTinyTest,
                         ::testing::Values(Emu3VqNaming::kTransformers, Emu3VqNaming::kBaai),
                         [](const ::testing::TestParamInfo<Emu3VqNaming>& p) {
                           return p.param == Emu3VqNaming::kBaai ? std::string("Baai") : std::string("Transformers");
                         });

TEST(CudaEmu3VqShapeTest, PublishedShapeWithRandomWeightsMatchesTheCpuDecoder) {
  const Emu3VqConfig config;  // the published tokenizer's decoder
  ASSERT_TRUE(emu3vq::ValidateEmu3VqConfig(config, "defaults").ok());
  absl::StatusOr<Emu3VqWeights> w = emu3vq::LoadEmu3VqWeights(RandomSource(2026), config, Emu3VqNaming::kBaai, "");
  ASSERT_TRUE(w.ok()) << w.status();
  constexpr int32_t kMaxCells = 80;
  absl::StatusOr<std::unique_ptr<CudaEmu3VqDecoder>> gpu = CudaEmu3VqDecoder::Create(*w, config, kMaxCells);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  std::cout << (*gpu)->description() << "\n";
  absl::StatusOr<std::unique_ptr<Emu3VqDecoder>> cpu = Emu3VqDecoder::Create(*std::move(w), config, kMaxCells);
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  // 64 x 80 px and 80 x 64 px: a non-square grid each way, two of one size together.
  const std::vector<CodeGrid> grids = {RandomGrid(8, 10, config.codebook_size, 1),
                                       RandomGrid(10, 8, config.codebook_size, 2),
                                       RandomGrid(8, 10, config.codebook_size, 3)};
  ExpectClose(Compare(**cpu, **gpu, grids), kShapeFloatTol, kShapeOffByOneShare, "published shape, random weights");
}

TEST(CudaEmu3VqOptionsTest, BadOptionsAreInvalidArgument) {
  Tiny t = LoadTiny(Emu3VqNaming::kBaai);
  ASSERT_FALSE(t.weights.codebook.empty());
  CudaEmu3VqOptions o;
  o.max_images_per_chunk = 0;
  EXPECT_EQ(CudaEmu3VqDecoder::Create(t.weights, t.config, 64, o).status().code(), absl::StatusCode::kInvalidArgument);
  o = {};
  o.workspace_bytes = 0;
  EXPECT_EQ(CudaEmu3VqDecoder::Create(t.weights, t.config, 64, o).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CudaEmu3VqDecoder::Create(t.weights, t.config, 0).status().code(), absl::StatusCode::kInvalidArgument);
  o = {};
  o.workspace_bytes = 1 << 10;  // not one image
  absl::StatusOr<std::unique_ptr<CudaEmu3VqDecoder>> tight = CudaEmu3VqDecoder::Create(t.weights, t.config, 64, o);
  ASSERT_FALSE(tight.ok());
  EXPECT_EQ(tight.status().code(), absl::StatusCode::kResourceExhausted) << tight.status();
  EXPECT_NE(tight.status().message().find("workspace_bytes"), std::string::npos) << tight.status();
}

}  // namespace
}  // namespace argen::vq
