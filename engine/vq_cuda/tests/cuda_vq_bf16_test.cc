// The GPU VQ decoder's bf16 path (CudaVqOptions::precision = kBf16) against
// the fp32 CPU decoder, and the decoder's streams. Needs a GPU (label gpu).
//
// Accuracy bound (bf16 against the CPU decoder's RGB8 bytes over the official
// conversion): PSNR >= kMinPsnrDb and max |diff| <= kMaxLevels 8-bit levels;
// floats within kMaxFloatError. The host emulation of the same program
// (vq_program_test, no GPU) measured: tiny checkpoints 45-47 dB / 9-10
// levels, shipped model 55 dB / 3 levels, random Janus structure at 64 px
// 43 dB / 15 levels, the Janus shape with random biases at 192 px 46 dB / 6
// levels; the GPU's own figures are printed by each test.
//
// Streams: a decode must not wait for other streams' work. A kernel that
// spins until the host releases it holds a blocking stream of the highest
// priority (as a long decode step would); Decode must still finish, which it
// cannot if it synchronised the device or used the legacy default stream.
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
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
#include "engine/vq_cuda/cuda_vq_decoder.h"
#include "engine/vq_cuda/tests/spin_kernel.h"
#include "engine/vq_cuda/tests/vq_test_util.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace argen::vq {
namespace {

using testing::ComparePixels;
using testing::PixelError;
using testing::RandomCheckpoint;
using testing::RandomGrids;

constexpr double kMinPsnrDb = 35.0;
constexpr int kMaxLevels = 24;
constexpr double kMaxFloatError = 0.2;

std::string SourceDir() {
  const char* dir = std::getenv("ARGEN_SOURCE_DIR");
  return dir ? dir : ".";
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

CudaVqOptions Bf16(int32_t chunk = 32) {
  CudaVqOptions o;
  o.precision = VqPrecision::kBf16;
  o.fallback_to_fp32 = false;  // a bf16 test must run bf16
  o.max_images_per_chunk = chunk;
  return o;
}

std::unique_ptr<CudaVqDecoder> Gpu(const checkpoint::Checkpoint& ckpt, const vq::Vq16Config& config,
                                   const CudaVqOptions& options) {
  auto d = CudaVqDecoder::Create(ckpt, config, options);
  EXPECT_TRUE(d.ok()) << d.status();
  if (!d.ok()) return nullptr;
  std::cout << (*d)->description() << "\n";
  return std::move(*d);
}

std::vector<std::vector<float>> CpuFloats(const checkpoint::Checkpoint& ckpt, const vq::Vq16Config& config,
                                          const std::vector<std::vector<int32_t>>& grids) {
  auto cpu = VqDecoder::Create(ckpt, config);
  EXPECT_TRUE(cpu.ok()) << cpu.status();
  std::vector<std::vector<float>> out(grids.size());
  if (!cpu.ok()) return out;
  for (size_t i = 0; i < grids.size(); ++i) EXPECT_TRUE((*cpu)->DecodeToFloat(grids[i], &out[i]).ok());
  return out;
}

// The bf16 decoder's floats and RGB8 bytes against the CPU's floats.
PixelError CheckAgainstCpu(CudaVqDecoder& gpu, const std::vector<std::vector<int32_t>>& grids,
                           const std::vector<std::vector<float>>& cpu, const std::string& what) {
  EXPECT_EQ(gpu.precision(), VqPrecision::kBf16) << what;
  std::vector<std::vector<float>> floats;
  absl::Status st = gpu.DecodeToFloatBatch(grids, &floats);
  EXPECT_TRUE(st.ok()) << st;
  auto rgb = gpu.Decode(grids);
  EXPECT_TRUE(rgb.ok()) << rgb.status();
  if (!st.ok() || !rgb.ok()) return {};
  const PixelError e = ComparePixels(floats, cpu, gpu.image_size());
  std::cout << what << ": bf16 GPU vs CPU: " << e.Describe() << "\n";
  EXPECT_GE(e.psnr_db, kMinPsnrDb) << what;
  EXPECT_LE(e.max_level, kMaxLevels) << what;
  EXPECT_LE(e.max_float, kMaxFloatError) << what;
  EXPECT_GT(e.bytes, 0u) << what;
  // Decode's bytes are the official conversion of DecodeToFloat's floats.
  const int32_t side = gpu.image_size();
  std::vector<uint8_t> bytes(3 * static_cast<size_t>(side) * side);
  for (size_t i = 0; i < grids.size() && i < rgb->size(); ++i) {
    ChwToRgb8(floats[i].data(), side, side, bytes.data());
    EXPECT_EQ((*rgb)[i].rgb, bytes) << what << ", image " << i;
    EXPECT_EQ((*rgb)[i].width, side);
  }
  return e;
}

class GoldenBf16Test : public ::testing::TestWithParam<std::string> {};

TEST_P(GoldenBf16Test, MatchesCpu) {
  const std::string dir = SourceDir() + "/tests/goldens/vq/";
  std::ifstream f(dir + GetParam() + ".json");
  std::stringstream text;
  text << f.rdbuf();
  const nlohmann::json meta = nlohmann::json::parse(text.str());
  auto grids = meta.at("grids").get<std::vector<std::vector<int32_t>>>();
  Model m = OpenModel(SourceDir() + "/" + meta.at("checkpoint").get<std::string>());
  ASSERT_NE(m.ckpt, nullptr);
  for (auto& g : RandomGrids(m.config, 5, 21)) grids.push_back(g);
  const auto cpu = CpuFloats(*m.ckpt, m.config, grids);
  for (int32_t chunk : {32, 3, 1}) {
    auto gpu = Gpu(*m.ckpt, m.config, Bf16(chunk));
    ASSERT_NE(gpu, nullptr);
    EXPECT_EQ(gpu->chunk_images(), chunk);
    CheckAgainstCpu(*gpu, grids, cpu, absl::StrCat(GetParam(), " chunk ", chunk));
  }
}

INSTANTIATE_TEST_SUITE_P(TinyCheckpoints, GoldenBf16Test, ::testing::Values("tiny-mha", "tiny-gqa-sharded"),
                         [](const auto& info) { return info.param == "tiny-mha" ? "Mha" : "GqaSharded"; });

class ShippedBf16Test : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { model_ = new Model(OpenModel(SourceDir() + "/models/argen-scenes-v1")); }
  static void TearDownTestSuite() {
    delete model_;
    model_ = nullptr;
  }
  static Model* model_;
};
Model* ShippedBf16Test::model_ = nullptr;

// 7 images through a chunk of 4: pieces of 4, 2 and 1 (each its own cuDNN plan).
TEST_F(ShippedBf16Test, LadderPiecesMatchCpuAndSingleImages) {
  ASSERT_NE(model_->ckpt, nullptr);
  const auto grids = RandomGrids(model_->config, 7, 22);
  const auto cpu = CpuFloats(*model_->ckpt, model_->config, grids);
  auto gpu = Gpu(*model_->ckpt, model_->config, Bf16(4));
  ASSERT_NE(gpu, nullptr);
  CheckAgainstCpu(*gpu, grids, cpu, "shipped, 7 images, chunk 4");
  // Each image decoded alone (batch 1's algorithms) is close to it decoded in the batch.
  std::vector<std::vector<float>> batch, single;
  ASSERT_TRUE(gpu->DecodeToFloatBatch(grids, &batch).ok());
  for (const auto& g : grids) {
    std::vector<float> one;
    ASSERT_TRUE(gpu->DecodeToFloat(g, &one).ok());
    single.push_back(std::move(one));
  }
  const PixelError e = ComparePixels(single, batch, gpu->image_size());
  std::cout << "shipped, single vs batched: " << e.Describe() << "\n";
  EXPECT_GE(e.psnr_db, kMinPsnrDb);
}

TEST_F(ShippedBf16Test, ConcurrentDecodesMatchSerial) {
  ASSERT_NE(model_->ckpt, nullptr);
  auto gpu = Gpu(*model_->ckpt, model_->config, Bf16(4));
  ASSERT_NE(gpu, nullptr);
  const auto grids = RandomGrids(model_->config, 6, 23);
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

TEST_F(ShippedBf16Test, ErrorsMatchCpu) {
  ASSERT_NE(model_->ckpt, nullptr);
  auto cpu = VqDecoder::Create(*model_->ckpt, model_->config);
  ASSERT_TRUE(cpu.ok());
  auto gpu = Gpu(*model_->ckpt, model_->config, Bf16(4));
  ASSERT_NE(gpu, nullptr);
  const int32_t cells = model_->config.image_tokens();
  std::vector<int32_t> bad(cells, 5);
  bad[9] = model_->config.codebook_size;
  for (const auto& batch : std::vector<std::vector<std::vector<int32_t>>>{{std::vector<int32_t>(cells, 1), bad},
                                                                          {std::vector<int32_t>(cells - 1, 0)}}) {
    auto want = (*cpu)->Decode(batch);
    auto got = gpu->Decode(batch);
    ASSERT_FALSE(want.ok());
    EXPECT_EQ(got.status(), want.status());
  }
  EXPECT_TRUE(gpu->Decode(RandomGrids(model_->config, 1, 24)).ok());
}

// The Janus-Pro VQ-16 shape (384 px, ch 128, ch_mult 1,1,2,2,4) with random
// weights, biases and GroupNorm affines, so every folded bias is exercised.
TEST(JanusShapedBf16Test, MatchesCpu) {
  vq::Vq16Config config;
  RandomCheckpoint ckpt;
  const auto grids = RandomGrids(config, 3, 25);
  const auto cpu = CpuFloats(ckpt, config, grids);
  auto gpu = Gpu(ckpt, config, Bf16(2));
  ASSERT_NE(gpu, nullptr);
  std::cout << "janus-shaped bf16: chunk " << gpu->chunk_images() << ", scratch " << gpu->scratch_bytes() / 1048576.0
            << " MiB, weights " << gpu->weight_bytes() / 1048576.0 << " MiB\n";
  CheckAgainstCpu(*gpu, grids, cpu, "janus-shaped, 3 images, chunk 2");
}

// A layout the bf16 kernels do not take (12 z channels): fp32 with a reason, or an error.
TEST(Bf16FallbackTest, FallsBackToFp32OrFails) {
  vq::Vq16Config config;
  config.ch = 32;
  config.ch_mult = {1, 2};
  config.codebook_size = 64;
  config.image_size = 16;
  config.z_channels = 12;
  RandomCheckpoint ckpt;
  CudaVqOptions o = Bf16();
  auto strict = CudaVqDecoder::Create(ckpt, config, o);
  ASSERT_FALSE(strict.ok());
  EXPECT_EQ(strict.status().code(), absl::StatusCode::kFailedPrecondition) << strict.status();
  EXPECT_NE(strict.status().message().find("bf16 path"), std::string::npos) << strict.status();
  o.fallback_to_fp32 = true;
  auto gpu = CudaVqDecoder::Create(ckpt, config, o);
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  EXPECT_EQ((*gpu)->precision(), VqPrecision::kFp32);
  EXPECT_NE((*gpu)->fallback_reason().find("post_quant_conv"), std::string::npos) << (*gpu)->fallback_reason();
  const auto grids = RandomGrids(config, 3, 26);
  const auto cpu = CpuFloats(ckpt, config, grids);
  std::vector<std::vector<float>> got;
  ASSERT_TRUE((*gpu)->DecodeToFloatBatch(grids, &got).ok());
  for (size_t i = 0; i < grids.size(); ++i)
    for (size_t p = 0; p < cpu[i].size(); ++p)
      ASSERT_NEAR(got[i][p], cpu[i][p], 1e-4 * std::max(1.0f, std::abs(cpu[i][p])));
}

// Decode finishes while a blocking, highest-priority stream is held by a spinning kernel.
class StreamTest : public ::testing::TestWithParam<VqPrecision> {};

TEST_P(StreamTest, DecodeDoesNotWaitForOtherStreams) {
  Model m = OpenModel(SourceDir() + "/models/argen-scenes-v1");
  ASSERT_NE(m.ckpt, nullptr);
  CudaVqOptions o = Bf16(4);
  o.precision = GetParam();
  auto gpu = Gpu(*m.ckpt, m.config, o);
  ASSERT_NE(gpu, nullptr);
  const auto grids = RandomGrids(m.config, 3, 27);
  ASSERT_TRUE(gpu->Decode(grids).ok());  // warm

  int least = 0, greatest = 0;
  ASSERT_EQ(cudaDeviceGetStreamPriorityRange(&least, &greatest), cudaSuccess);
  cudaStream_t busy = nullptr;
  ASSERT_EQ(cudaStreamCreateWithPriority(&busy, cudaStreamDefault, greatest), cudaSuccess);
  int* flag = nullptr;
  ASSERT_EQ(cudaHostAlloc(reinterpret_cast<void**>(&flag), sizeof(int), cudaHostAllocMapped), cudaSuccess);
  *reinterpret_cast<volatile int*>(flag) = 0;
  int* device_flag = nullptr;
  ASSERT_EQ(cudaHostGetDevicePointer(reinterpret_cast<void**>(&device_flag), flag, 0), cudaSuccess);
  ASSERT_EQ(testing::LaunchSpinUntilFlag(device_flag, busy), cudaSuccess);

  std::atomic<bool> done{false};
  absl::Status status;
  std::thread decoder([&] {
    status = gpu->Decode(grids).status();
    done = true;
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const bool finished_while_busy = done;
  *reinterpret_cast<volatile int*>(flag) = 1;  // release the spinner in every case
  decoder.join();
  EXPECT_EQ(cudaStreamSynchronize(busy), cudaSuccess);
  cudaStreamDestroy(busy);
  cudaFreeHost(flag);
  EXPECT_TRUE(finished_while_busy) << "Decode waited for another stream's work (a device synchronisation or the "
                                      "legacy default stream)";
  EXPECT_TRUE(status.ok()) << status;
}

INSTANTIATE_TEST_SUITE_P(Precisions, StreamTest, ::testing::Values(VqPrecision::kFp32, VqPrecision::kBf16),
                         [](const auto& info) { return VqPrecisionName(info.param); });

}  // namespace
}  // namespace argen::vq
