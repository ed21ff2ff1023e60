// EngineOptions::vq_backend through CreateEngine on the tiny checkpoint:
// validation, "cuda" in a build without CUDA, and "auto"/"cpu"/"cuda" images;
// the same choice for Emu3's vision decoder (tiny-emu3-gen: its GPU decoder
// in fp32, and bf16 as auto and bf16 take it; mixed sizes in one call).
// Needs no GPU: where "cuda" cannot run (no device) it must fail with a
// Status that names vq_backend, never crash.
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/engine.h"
#include "engine/vq/vq_precision.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/golden_files.h"

namespace argen::engine {
namespace {

std::string TinyDir() {
  const char* dir = std::getenv("ARGEN_SOURCE_DIR");
  return std::string(dir ? dir : ".") + "/tests/goldens/tiny/tiny-mha";
}

EngineOptions Options(const std::string& vq_backend) {
  EngineOptions o;
  o.model_dir = TinyDir();
  o.backend = "cpu";
  o.threads = 1;
  o.vq_backend = vq_backend;
  return o;
}

std::vector<std::vector<int32_t>> Grids(const Engine& e) {
  std::vector<std::vector<int32_t>> grids(3, std::vector<int32_t>(e.info().image_tokens));
  for (size_t i = 0; i < grids.size(); ++i)
    for (size_t p = 0; p < grids[i].size(); ++p)
      grids[i][p] = static_cast<int32_t>((i * 31 + p * 7) % e.info().image_vocab);
  return grids;
}

TEST(VqBackendOptionTest, UnknownValueIsInvalidArgument) {
  for (const char* bad : {"bogus", "", "CUDA", "gpu"}) {
    absl::StatusOr<std::unique_ptr<Engine>> e = CreateEngine(Options(bad));
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument) << e.status();
    EXPECT_NE(
        e.status().message().find("vq_backend must be \"auto\", \"cpu\" or \"cuda\", got \"" + std::string(bad) + "\""),
        std::string::npos)
        << e.status();
  }
}

TEST(VqBackendOptionTest, VqPrecisionIsValidated) {
  for (const char* bad : {"bogus", "", "BF16", "fp16"}) {
    EngineOptions o = Options("auto");
    o.vq_precision = bad;
    absl::StatusOr<std::unique_ptr<Engine>> e = CreateEngine(o);
    ASSERT_FALSE(e.ok()) << bad;
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument) << e.status();
    EXPECT_NE(e.status().message().find("vq_precision must be \"auto\", \"fp32\", \"tf32\" or \"bf16\", got \"" +
                                        std::string(bad) + "\""),
              std::string::npos)
        << e.status();
  }
  // The CPU decoder is fp32: bf16 and tf32 need the GPU one.
  for (const char* gpu_only : {"bf16", "tf32"}) {
    EngineOptions o = Options("cpu");
    o.vq_precision = gpu_only;
    absl::StatusOr<std::unique_ptr<Engine>> e = CreateEngine(o);
    ASSERT_FALSE(e.ok()) << gpu_only;
    EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument) << e.status();
    EXPECT_NE(e.status().message().find("needs the GPU VQ decoder"), std::string::npos) << e.status();
  }
  for (const char* fine : {"auto", "fp32"}) {
    EngineOptions o = Options("cpu");
    o.vq_precision = fine;
    EXPECT_TRUE(CreateEngine(o).ok()) << fine;
  }
}

TEST(VqBackendOptionTest, DecoderPrecisionParsesOnce) {
  for (vq::DecoderPrecision p : {vq::DecoderPrecision::kAuto, vq::DecoderPrecision::kBf16, vq::DecoderPrecision::kTf32,
                                 vq::DecoderPrecision::kFp32}) {
    absl::StatusOr<vq::DecoderPrecision> parsed = vq::ParseDecoderPrecision(vq::DecoderPrecisionName(p));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, p);
  }
  EXPECT_TRUE(vq::NeedsGpuDecoder(vq::DecoderPrecision::kBf16));
  EXPECT_TRUE(vq::NeedsGpuDecoder(vq::DecoderPrecision::kTf32));
  EXPECT_FALSE(vq::NeedsGpuDecoder(vq::DecoderPrecision::kAuto));
  EXPECT_FALSE(vq::NeedsGpuDecoder(vq::DecoderPrecision::kFp32));
  absl::StatusOr<vq::DecoderPrecision> bad = vq::ParseDecoderPrecision("fp16");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "vq_precision must be \"auto\", \"fp32\", \"tf32\" or \"bf16\", got \"fp16\"");
}

TEST(VqBackendOptionTest, AutoAndCpuDecodeOnTheCpuBackend) {
  std::vector<std::vector<RgbImage>> results;
  for (const char* vq : {"auto", "cpu"}) {
    absl::StatusOr<std::unique_ptr<Engine>> e = CreateEngine(Options(vq));
    ASSERT_TRUE(e.ok()) << vq << ": " << e.status();
    absl::StatusOr<std::vector<RgbImage>> images = (*e)->DecodeImages(Grids(**e));
    ASSERT_TRUE(images.ok()) << images.status();
    ASSERT_EQ(images->size(), 3u);
    results.push_back(*std::move(images));
  }
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(results[0][i].rgb, results[1][i].rgb);
}

TEST(VqBackendOptionTest, CudaDecoder) {
  EngineOptions fp32 = Options("cuda");
  fp32.vq_precision = "fp32";  // the accuracy reference: within a level of the CPU decoder
  absl::StatusOr<std::unique_ptr<Engine>> e = CreateEngine(fp32);
#if !defined(ARGEN_WITH_CUDA)
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kUnimplemented) << e.status();
  EXPECT_NE(e.status().message().find("vq_backend \"cuda\""), std::string::npos) << e.status();
#else
  if (!e.ok()) {  // a CUDA build on a machine without a usable GPU (CI)
    EXPECT_NE(e.status().code(), absl::StatusCode::kInvalidArgument) << e.status();
    EXPECT_NE(e.status().code(), absl::StatusCode::kUnimplemented) << e.status();
    EXPECT_NE(e.status().message().find("vq_backend \"cuda\""), std::string::npos) << e.status();
    GTEST_SKIP() << "no GPU here: " << e.status();
  }
  absl::StatusOr<std::unique_ptr<Engine>> cpu = CreateEngine(Options("cpu"));
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  const auto grids = Grids(**e);
  absl::StatusOr<std::vector<RgbImage>> got = (*e)->DecodeImages(grids);
  absl::StatusOr<std::vector<RgbImage>> want = (*cpu)->DecodeImages(grids);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(got->size(), want->size());
  for (size_t i = 0; i < want->size(); ++i) {
    ASSERT_EQ((*got)[i].rgb.size(), (*want)[i].rgb.size());
    for (size_t p = 0; p < (*want)[i].rgb.size(); ++p)
      ASSERT_LE(std::abs(int{(*got)[i].rgb[p]} - int{(*want)[i].rgb[p]}), 1) << i << " " << p;
  }
  // The same decoder rejects bad grids as the CPU one does.
  auto bad = grids;
  bad[1][5] = -1;
  EXPECT_EQ((*e)->DecodeImages(bad).status(), (*cpu)->DecodeImages(bad).status());
  // The default (auto: bf16 on tensor cores) within the bf16 bound of cuda_vq_bf16_test.
  absl::StatusOr<std::unique_ptr<Engine>> fast = CreateEngine(Options("cuda"));
  ASSERT_TRUE(fast.ok()) << fast.status();
  absl::StatusOr<std::vector<RgbImage>> bf16 = (*fast)->DecodeImages(grids);
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  ASSERT_EQ(bf16->size(), want->size());
  for (size_t i = 0; i < want->size(); ++i) {
    ASSERT_EQ((*bf16)[i].rgb.size(), (*want)[i].rgb.size());
    for (size_t p = 0; p < (*want)[i].rgb.size(); ++p)
      ASSERT_LE(std::abs(int{(*bf16)[i].rgb[p]} - int{(*want)[i].rgb[p]}), 24) << i << " " << p;
  }
#endif
}

EngineOptions Emu3Options(const std::string& vq_backend, const std::string& vq_precision = "auto") {
  EngineOptions o;
  o.model_dir = test_support::SourceDir() + "/tests/goldens/tiny/tiny-emu3-gen";
  o.backend = "cpu";
  o.threads = 1;
  o.vq_backend = vq_backend;
  o.vq_precision = vq_precision;
  return o;
}

// Decode sequences of the tiny Emu3 (visual ids, a row end after every row
// but the last): 4 x 4 codes (its default 32 x 32 px) and 5 x 3 (40 x 24 px).
[[maybe_unused]] std::vector<std::vector<int32_t>> Emu3Sequences() {  // used where CUDA is built
  const nlohmann::json g = test_support::ReadJson("tests/goldens/tiny/emu3-goldens/goldens.json");
  const int32_t row_end = g["ids"]["<|extra_200|>"].get<int32_t>();
  const int32_t first = g["first_visual_id"].get<int32_t>(), codes = g["codebook_size"].get<int32_t>();
  std::vector<std::vector<int32_t>> sequences;
  int32_t k = 0;
  for (auto [w, h] : {std::pair{4, 4}, std::pair{5, 3}, std::pair{4, 4}}) {
    std::vector<int32_t> s;
    for (int32_t row = 0; row < h; ++row) {
      if (row > 0) s.push_back(row_end);
      for (int32_t x = 0; x < w; ++x) s.push_back(first + (k++ * 7) % codes);
    }
    sequences.push_back(std::move(s));
  }
  return sequences;
}

TEST(VqBackendOptionTest, Emu3CudaDecoder) {
  absl::StatusOr<std::unique_ptr<Engine>> e = CreateEngine(Emu3Options("cuda", "fp32"));
#if !defined(ARGEN_WITH_CUDA)
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kUnimplemented) << e.status();
  EXPECT_NE(e.status().message().find("vq_backend \"cuda\""), std::string::npos) << e.status();
#else
  // bf16 is accepted like fp32: it fails only where the GPU decoder cannot start.
  absl::StatusOr<std::unique_ptr<Engine>> bf16 = CreateEngine(Emu3Options("cuda", "bf16"));
  if (!e.ok()) {  // a CUDA build on a machine without a usable GPU (CI)
    for (const absl::Status& st : {e.status(), bf16.status()}) {
      EXPECT_FALSE(st.ok());
      EXPECT_NE(st.code(), absl::StatusCode::kInvalidArgument) << st;
      EXPECT_NE(st.code(), absl::StatusCode::kUnimplemented) << st;
      EXPECT_NE(st.message().find("vq_backend \"cuda\""), std::string::npos) << st;
    }
    GTEST_SKIP() << "no GPU here: " << e.status();
  }
  ASSERT_TRUE(bf16.ok()) << bf16.status();
  absl::StatusOr<std::unique_ptr<Engine>> cpu = CreateEngine(Emu3Options("cpu"));
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  const std::vector<std::vector<int32_t>> sequences = Emu3Sequences();
  absl::StatusOr<std::vector<RgbImage>> got = (*e)->DecodeImages(sequences);
  absl::StatusOr<std::vector<RgbImage>> want = (*cpu)->DecodeImages(sequences);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(got->size(), 3u);
  EXPECT_EQ((*got)[1].width, 40);
  EXPECT_EQ((*got)[1].height, 24);
  for (size_t i = 0; i < want->size(); ++i) {
    EXPECT_EQ((*got)[i].width, (*want)[i].width);
    ASSERT_EQ((*got)[i].rgb.size(), (*want)[i].rgb.size());
    for (size_t p = 0; p < (*want)[i].rgb.size(); ++p)
      ASSERT_LE(std::abs(int{(*got)[i].rgb[p]} - int{(*want)[i].rgb[p]}), 1) << i << " " << p;
  }
  // A sequence that is no size's is refused as on the CPU.
  auto bad = sequences;
  bad[1].pop_back();
  EXPECT_EQ((*e)->DecodeImages(bad).status(), (*cpu)->DecodeImages(bad).status());
  // The default precision (auto) and bf16 take the bf16 path: within cuda_emu3vq_bf16_test's bound on the
  // tiny tokenizer's mean level difference (its max is not bounded there: the tiny tokenizer is ill-conditioned).
  absl::StatusOr<std::unique_ptr<Engine>> fast = CreateEngine(Emu3Options("cuda"));
  ASSERT_TRUE(fast.ok()) << fast.status();
  for (Engine* engine : {fast->get(), bf16->get()}) {
    absl::StatusOr<std::vector<RgbImage>> images = engine->DecodeImages(sequences);
    ASSERT_TRUE(images.ok()) << images.status();
    ASSERT_EQ(images->size(), want->size());
    double sum = 0;
    size_t bytes = 0;
    for (size_t i = 0; i < want->size(); ++i) {
      EXPECT_EQ((*images)[i].width, (*want)[i].width) << i;
      ASSERT_EQ((*images)[i].rgb.size(), (*want)[i].rgb.size()) << i;
      for (size_t p = 0; p < (*want)[i].rgb.size(); ++p)
        sum += std::abs(int{(*images)[i].rgb[p]} - int{(*want)[i].rgb[p]});
      bytes += (*want)[i].rgb.size();
    }
    ASSERT_GT(bytes, 0u);
    EXPECT_LE(sum / static_cast<double>(bytes), 4.0);
  }
#endif
}

}  // namespace
}  // namespace argen::engine
