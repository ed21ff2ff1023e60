// The GPU VQ-16 decoder against the CPU VqDecoder (the reference, itself
// checked against PyTorch goldens in engine/vq/tests): float pixels, RGB8
// bytes, chunking (a batch larger than a forced-small chunk, a chunk of one),
// a banded im2col (small workspace limit), a Janus-Pro-shaped decoder with
// random weights, TF32, the CPU's error messages and concurrent callers.
// Needs a GPU (label gpu).
//
// Bounds (fp32): float output within kFloatTol of the CPU relative to
// max(1, |cpu|); RGB8 bytes within 1 level, at most 0.5% of them off by one (a
// float within rounding of an integer boundary truncates to the neighbour).
// Measured on the H200 (2026-11-29): fp32 worst relative error 3.5e-6 (shipped
// model), 9.5e-6 (Janus shape), 6.3e-6 against PyTorch; at most 0.025% of the
// bytes off by one; TF32 2.1e-3 and 1.6% of the bytes off by one.
#include "engine/vq_cuda/cuda_vq_decoder.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/families/janus/janus_config.h"
#include "engine/vq/pixels.h"
#include "engine/vq/vq_config.h"
#include "engine/vq/vq_decoder.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace argen::vq {
namespace {

constexpr double kFloatTol = 1e-4;      // fp32, relative to max(1, |cpu|)
constexpr double kTf32FloatTol = 5e-2;  // TF32 GEMMs (10-bit mantissa inputs)

std::string SourceDir() {
  const char* dir = std::getenv("ARGEN_SOURCE_DIR");
  return dir ? dir : ".";
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct Model {
  std::unique_ptr<checkpoint::Checkpoint> ckpt;
  vq::Vq16Config config;
};

Model OpenModel(const std::string& dir) {
  Model m;
  auto ckpt = checkpoint::Checkpoint::Open(dir);
  EXPECT_TRUE(ckpt.ok()) << ckpt.status();
  auto config = janus::LoadJanusConfig(dir);
  EXPECT_TRUE(config.ok()) << config.status();
  if (ckpt.ok()) m.ckpt = std::move(*ckpt);
  if (config.ok()) m.config = config->gen_vision;
  return m;
}

std::unique_ptr<VqDecoder> Cpu(const checkpoint::Checkpoint& ckpt, const vq::Vq16Config& config) {
  auto d = VqDecoder::Create(ckpt, config);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? std::move(*d) : nullptr;
}

std::unique_ptr<CudaVqDecoder> Gpu(const checkpoint::Checkpoint& ckpt, const vq::Vq16Config& config,
                                   CudaVqOptions options = {}) {
  auto d = CudaVqDecoder::Create(ckpt, config, options);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? std::move(*d) : nullptr;
}

std::vector<std::vector<int32_t>> RandomGrids(const vq::Vq16Config& config, int count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, config.codebook_size - 1);
  std::vector<std::vector<int32_t>> grids(count, std::vector<int32_t>(config.image_tokens()));
  for (auto& g : grids)
    for (int32_t& t : g) t = id(rng);
  return grids;
}

struct Diff {
  double max_rel = 0;  // floats: max |gpu - cpu| / max(1, |cpu|)
  int max_byte = 0;    // RGB8: max |gpu - cpu|
  size_t off_by_one = 0, bytes = 0;
};

// Compares the GPU decoder (floats of the whole batch, then RGB8 of the whole
// batch) with the CPU decoder grid by grid.
Diff Compare(VqDecoder& cpu, CudaVqDecoder& gpu, const std::vector<std::vector<int32_t>>& grids) {
  Diff d;
  std::vector<std::vector<float>> gpu_float;
  absl::Status st = gpu.DecodeToFloatBatch(grids, &gpu_float);
  EXPECT_TRUE(st.ok()) << st;
  auto gpu_rgb = gpu.Decode(grids);
  EXPECT_TRUE(gpu_rgb.ok()) << gpu_rgb.status();
  if (!st.ok() || !gpu_rgb.ok()) return d;
  EXPECT_EQ(gpu_float.size(), grids.size());
  EXPECT_EQ(gpu_rgb->size(), grids.size());
  std::vector<float> want;
  for (size_t i = 0; i < grids.size() && i < gpu_float.size() && i < gpu_rgb->size(); ++i) {
    EXPECT_TRUE(cpu.DecodeToFloat(grids[i], &want).ok());
    // The CPU Decode's bytes are ChwToRgb8 of these floats (vq_decoder.cc).
    engine::RgbImage c;
    c.width = c.height = cpu.image_size();
    c.rgb.resize(want.size());
    ChwToRgb8(want.data(), c.height, c.width, c.rgb.data());
    EXPECT_EQ(gpu_float[i].size(), want.size());
    for (size_t p = 0; p < want.size() && p < gpu_float[i].size(); ++p) {
      const double err = std::abs(double{gpu_float[i][p]} - want[p]) / std::max(1.0, std::abs(double{want[p]}));
      if (!(err <= d.max_rel)) d.max_rel = std::isnan(err) ? INFINITY : err;
    }
    const engine::RgbImage& g = (*gpu_rgb)[i];
    EXPECT_EQ(g.width, c.width);
    EXPECT_EQ(g.height, c.height);
    EXPECT_EQ(g.rgb.size(), c.rgb.size());
    for (size_t p = 0; p < c.rgb.size() && p < g.rgb.size(); ++p) {
      const int diff = std::abs(int{g.rgb[p]} - int{c.rgb[p]});
      d.max_byte = std::max(d.max_byte, diff);
      d.off_by_one += diff != 0;
    }
    d.bytes += c.rgb.size();
  }
  return d;
}

void ExpectFp32Close(const Diff& d, const std::string& what) {
  std::cout << what << ": max relative float error " << d.max_rel << ", max byte diff " << d.max_byte << ", "
            << d.off_by_one << " of " << d.bytes << " bytes differ\n";
  EXPECT_LE(d.max_rel, kFloatTol) << what;
  EXPECT_LE(d.max_byte, 1) << what;
  EXPECT_LE(d.off_by_one, d.bytes / 200) << what;
  EXPECT_GT(d.bytes, 0u) << what;
}

// --- The tiny golden checkpoints (PyTorch goldens' grids) ---

class GoldenCheckpointTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenCheckpointTest, MatchesCpuAndPyTorch) {
  const std::string dir = SourceDir() + "/tests/goldens/vq/";
  const nlohmann::json meta = nlohmann::json::parse(ReadFile(dir + GetParam() + ".json"));
  const auto grids = meta.at("grids").get<std::vector<std::vector<int32_t>>>();
  Model m = OpenModel(SourceDir() + "/" + meta.at("checkpoint").get<std::string>());
  ASSERT_NE(m.ckpt, nullptr);
  auto cpu = Cpu(*m.ckpt, m.config);
  ASSERT_NE(cpu, nullptr);
  for (int32_t chunk : {32, 1}) {
    CudaVqOptions o;
    o.max_images_per_chunk = chunk;
    auto gpu = Gpu(*m.ckpt, m.config, o);
    ASSERT_NE(gpu, nullptr);
    ExpectFp32Close(Compare(*cpu, *gpu, grids), absl::StrCat(GetParam(), " chunk ", chunk));
  }
  // And against PyTorch directly, with the CPU test's bound.
  auto gpu = Gpu(*m.ckpt, m.config);
  ASSERT_NE(gpu, nullptr);
  const std::string px = ReadFile(dir + meta.at("pixels_file").get<std::string>());
  std::vector<float> golden(px.size() / sizeof(float));
  std::memcpy(golden.data(), px.data(), golden.size() * sizeof(float));
  std::vector<std::vector<float>> out;
  ASSERT_TRUE(gpu->DecodeToFloatBatch(grids, &out).ok());
  const size_t per_image = golden.size() / grids.size();
  double max_err = 0;
  for (size_t i = 0; i < grids.size(); ++i) {
    ASSERT_EQ(out[i].size(), per_image);
    for (size_t p = 0; p < per_image; ++p) {
      const double want = golden[i * per_image + p];
      max_err = std::max(max_err, std::abs(out[i][p] - want) / std::max(1.0, std::abs(want)));
    }
  }
  std::cout << GetParam() << ": GPU vs PyTorch max relative error " << max_err << "\n";
  EXPECT_LE(max_err, 1e-4);
}

INSTANTIATE_TEST_SUITE_P(TinyCheckpoints, GoldenCheckpointTest, ::testing::Values("tiny-mha", "tiny-gqa-sharded"),
                         [](const auto& info) { return info.param == "tiny-mha" ? "Mha" : "GqaSharded"; });

// --- The shipped model ---

class ShippedModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_ = new Model(OpenModel(SourceDir() + "/models/argen-scenes-v1"));
    if (model_->ckpt) cpu_ = Cpu(*model_->ckpt, model_->config).release();
  }
  static void TearDownTestSuite() {
    delete cpu_;
    delete model_;
    cpu_ = nullptr;
    model_ = nullptr;
  }
  static Model* model_;
  static VqDecoder* cpu_;
};
Model* ShippedModelTest::model_ = nullptr;
VqDecoder* ShippedModelTest::cpu_ = nullptr;

TEST_F(ShippedModelTest, DefaultChunkMatchesCpu) {
  ASSERT_NE(cpu_, nullptr);
  auto gpu = Gpu(*model_->ckpt, model_->config);
  ASSERT_NE(gpu, nullptr);
  std::cout << "chunk " << gpu->chunk_images() << ", scratch " << gpu->scratch_bytes() / 1048576.0 << " MiB\n";
  ExpectFp32Close(Compare(*cpu_, *gpu, RandomGrids(model_->config, 5, 1)), "shipped, default chunk");
}

TEST_F(ShippedModelTest, BatchLargerThanChunkAndChunkOfOne) {
  ASSERT_NE(cpu_, nullptr);
  const auto grids = RandomGrids(model_->config, 7, 2);
  for (int32_t chunk : {3, 1}) {
    CudaVqOptions o;
    o.max_images_per_chunk = chunk;
    auto gpu = Gpu(*model_->ckpt, model_->config, o);
    ASSERT_NE(gpu, nullptr);
    EXPECT_EQ(gpu->chunk_images(), chunk);
    ExpectFp32Close(Compare(*cpu_, *gpu, grids), absl::StrCat("shipped, chunk ", chunk, ", batch 7"));
  }
}

// A workspace limit far below the chunk's im2col: the 3x3 convs run in column
// bands, which cross image boundaries.
TEST_F(ShippedModelTest, BandedIm2ColMatchesCpu) {
  ASSERT_NE(cpu_, nullptr);
  CudaVqOptions o;
  o.max_images_per_chunk = 4;
  o.workspace_bytes = 200 << 20;  // activations (29 MiB an image) get half: 3 images; band ~113 MiB of 3 x 81
  auto gpu = Gpu(*model_->ckpt, model_->config, o);
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(gpu->chunk_images(), 3);  // activations may use only half of the limit
  std::cout << "banded: chunk " << gpu->chunk_images() << ", scratch " << gpu->scratch_bytes() / 1048576.0 << " MiB\n";
  ExpectFp32Close(Compare(*cpu_, *gpu, RandomGrids(model_->config, 5, 3)), "shipped, banded im2col");
}

TEST_F(ShippedModelTest, Tf32IsClose) {
  ASSERT_NE(cpu_, nullptr);
  CudaVqOptions o;
  o.precision = VqPrecision::kTf32;
  auto gpu = Gpu(*model_->ckpt, model_->config, o);
  ASSERT_NE(gpu, nullptr);
  const Diff d = Compare(*cpu_, *gpu, RandomGrids(model_->config, 4, 4));
  std::cout << "tf32: max relative float error " << d.max_rel << ", max byte diff " << d.max_byte << ", "
            << d.off_by_one << " of " << d.bytes << " bytes differ\n";
  EXPECT_LE(d.max_rel, kTf32FloatTol);
  EXPECT_LE(d.max_byte, static_cast<int>(std::ceil(kTf32FloatTol * 127.5)) + 1);
}

TEST_F(ShippedModelTest, ConcurrentDecodesMatchSerial) {
  auto gpu = Gpu(*model_->ckpt, model_->config, CudaVqOptions{.max_images_per_chunk = 4});
  ASSERT_NE(gpu, nullptr);
  const auto grids = RandomGrids(model_->config, 6, 5);
  auto serial = gpu->Decode(grids);
  ASSERT_TRUE(serial.ok()) << serial.status();
  std::vector<std::vector<engine::RgbImage>> results(4);
  std::vector<absl::Status> status(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] {
      for (int rep = 0; rep < 3; ++rep) {
        auto r = gpu->Decode(grids);
        status[t] = r.status();
        if (!r.ok()) return;
        results[t] = std::move(*r);
      }
    });
  }
  for (auto& th : threads) th.join();
  for (size_t t = 0; t < results.size(); ++t) {
    ASSERT_TRUE(status[t].ok()) << status[t];
    ASSERT_EQ(results[t].size(), serial->size());
    for (size_t i = 0; i < serial->size(); ++i) EXPECT_EQ(results[t][i].rgb, (*serial)[i].rgb) << t << " " << i;
  }
}

// Every bad grid gives exactly the CPU decoder's status, and nothing is decoded.
TEST_F(ShippedModelTest, ErrorsMatchCpu) {
  ASSERT_NE(cpu_, nullptr);
  auto gpu = Gpu(*model_->ckpt, model_->config);
  ASSERT_NE(gpu, nullptr);
  const int32_t cells = model_->config.image_tokens();
  std::vector<std::vector<std::vector<int32_t>>> bad_batches;
  bad_batches.push_back({std::vector<int32_t>(cells, 0), std::vector<int32_t>(cells - 1, 0)});
  bad_batches.push_back({std::vector<int32_t>(cells + 1, 3)});
  bad_batches.push_back({std::vector<int32_t>()});
  for (int32_t bad : {-1, model_->config.codebook_size, 1 << 30}) {
    std::vector<int32_t> grid(cells, 5);
    grid[17] = bad;
    bad_batches.push_back({std::vector<int32_t>(cells, 1), grid, std::vector<int32_t>(3, 0)});
  }
  for (const auto& batch : bad_batches) {
    auto want = cpu_->Decode(batch);
    auto got = gpu->Decode(batch);
    ASSERT_FALSE(want.ok());
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status(), want.status());
    std::vector<std::vector<float>> floats;
    EXPECT_EQ(gpu->DecodeToFloatBatch(batch, &floats), want.status());
  }
  std::vector<int32_t> grid(cells, 5);
  grid[3] = -7;
  std::vector<float> a, b;
  EXPECT_EQ(gpu->DecodeToFloat(grid, &a), cpu_->DecodeToFloat(grid, &b));
  auto empty = gpu->Decode({});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
  // Still works after the errors.
  EXPECT_TRUE(gpu->Decode(RandomGrids(model_->config, 1, 6)).ok());
}

TEST_F(ShippedModelTest, OptionsAreValidated) {
  ASSERT_NE(model_->ckpt, nullptr);
  for (int32_t chunk : {0, -1, 4097}) {
    auto r = CudaVqDecoder::Create(*model_->ckpt, model_->config, {.max_images_per_chunk = chunk});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("max_images_per_chunk"), std::string::npos) << r.status();
  }
  auto r = CudaVqDecoder::Create(*model_->ckpt, model_->config, {.workspace_bytes = 0});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  r = CudaVqDecoder::Create(*model_->ckpt, model_->config, {.workspace_bytes = 1 << 20});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(r.status().message().find("workspace_bytes"), std::string::npos) << r.status();
  vq::Vq16Config wrong = model_->config;
  wrong.z_channels = 48;
  r = CudaVqDecoder::Create(*model_->ckpt, wrong);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("gen_vision_model.post_quant_conv.weight"), std::string::npos) << r.status();
}

// --- A Janus-Pro-shaped decoder (384 px, ch 128, ch_mult 1,1,2,2,4) with random weights ---

// Any tensor exists with the asked shape: conv weights ~ N(0, 1/fan_in), norm
// weights 1, biases 0, the codebook N(0, 1); deterministic per name.
class RandomCheckpoint final : public checkpoint::Checkpoint {
 public:
  const std::string& dir() const override { return dir_; }
  bool Has(std::string_view) const override { return true; }
  absl::StatusOr<const checkpoint::TensorInfo*> Find(std::string_view name) const override {
    return absl::UnimplementedError(absl::StrCat("random checkpoint: no raw tensor ", std::string(name)));
  }
  absl::Status ReadRowsF32(std::string_view name, const int32_t*, int64_t, float*) const override {
    return absl::UnimplementedError(absl::StrCat("random checkpoint: no rows of ", std::string(name)));
  }
  absl::StatusOr<std::vector<float>> LoadF32(std::string_view name, const std::vector<int64_t>& shape) const override {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    if (shape.size() == 1) {
      std::fill(v.begin(), v.end(), name.ends_with(".bias") ? 0.0f : 1.0f);
      return v;
    }
    const double fan_in = shape.size() == 4 ? static_cast<double>(shape[1] * shape[2] * shape[3]) : 1.0;
    std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string_view>{}(name)));
    std::normal_distribution<float> dist(0.0f, static_cast<float>(1.0 / std::sqrt(fan_in)));
    for (float& x : v) x = dist(rng);
    return v;
  }

 private:
  std::string dir_ = "<random>";
};

TEST(JanusShapedTest, ChunkedAndBandedMatchesCpu) {
  vq::Vq16Config config;  // official VQ-16 defaults: 384 px, ch 128, 16384 x 8 codebook
  RandomCheckpoint ckpt;
  auto cpu = Cpu(ckpt, config);
  ASSERT_NE(cpu, nullptr);
  // 2 GiB: activations (~231 MiB an image) limit the chunk to 4; the 3x3 im2col
  // (680 MiB an image at 384 px, 128 channels) runs in bands.
  CudaVqOptions o;
  o.workspace_bytes = int64_t{2} << 30;
  auto gpu = Gpu(ckpt, config, o);
  ASSERT_NE(gpu, nullptr);
  std::cout << "janus-shaped: chunk " << gpu->chunk_images() << ", scratch " << gpu->scratch_bytes() / 1048576.0
            << " MiB, weights " << gpu->weight_bytes() / 1048576.0 << " MiB\n";
  EXPECT_EQ(gpu->chunk_images(), 4);
  ExpectFp32Close(Compare(*cpu, *gpu, RandomGrids(config, 5, 7)), "janus-shaped, 5 images, chunk 4");
}

}  // namespace
}  // namespace argen::vq
