// The CPU VQ-16 decoder against PyTorch goldens (tools/goldens/make_vq_goldens.py:
// tools/janus_torch/vq16.py, checked against the official Janus vq_model.py, on
// the tiny checkpoints' gen_vision_model weights), plus its error paths.
#include "engine/vq/vq_decoder.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/checkpoint/checkpoint.h"
#include "engine/families/janus/janus_config.h"
#include "engine/vq/vq_config.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace argen::vq {
namespace {

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

struct Golden {
  std::string checkpoint_dir;
  int32_t image_size = 0;
  std::vector<std::vector<int32_t>> grids;
  std::vector<float> pixels;  // [grid][3][size][size]
  std::vector<uint8_t> rgb8;  // [grid][size][size][3]
};

Golden LoadGolden(const std::string& variant) {
  const std::string dir = SourceDir() + "/tests/goldens/vq/";
  const nlohmann::json meta = nlohmann::json::parse(ReadFile(dir + variant + ".json"));
  Golden g;
  g.checkpoint_dir = SourceDir() + "/" + meta.at("checkpoint").get<std::string>();
  g.image_size = meta.at("image_size");
  g.grids = meta.at("grids").get<std::vector<std::vector<int32_t>>>();
  const std::string px = ReadFile(dir + meta.at("pixels_file").get<std::string>());
  g.pixels.resize(px.size() / sizeof(float));
  std::memcpy(g.pixels.data(), px.data(), g.pixels.size() * sizeof(float));  // little-endian host
  const std::string rgb = ReadFile(dir + meta.at("rgb8_file").get<std::string>());
  g.rgb8.assign(rgb.begin(), rgb.end());
  const size_t per_image = 3 * static_cast<size_t>(g.image_size) * g.image_size;
  EXPECT_EQ(g.pixels.size(), g.grids.size() * per_image) << variant << ": truncated pixel golden";
  EXPECT_EQ(g.rgb8.size(), g.grids.size() * per_image) << variant << ": truncated rgb8 golden";
  double sum = 0;
  for (float x : g.pixels) sum += x;
  EXPECT_NEAR(sum, meta.at("pixels_sum").get<double>(), 1e-6 * (1 + std::abs(sum)));
  return g;
}

std::unique_ptr<VqDecoder> OpenDecoder(const std::string& dir) {
  auto ckpt = checkpoint::Checkpoint::Open(dir);
  EXPECT_TRUE(ckpt.ok()) << ckpt.status();
  auto config = janus::LoadJanusConfig(dir);
  EXPECT_TRUE(config.ok()) << config.status();
  auto decoder = VqDecoder::Create(**ckpt, config->gen_vision);
  EXPECT_TRUE(decoder.ok()) << decoder.status();
  return decoder.ok() ? std::move(*decoder) : nullptr;
}

class VqGoldenTest : public ::testing::TestWithParam<std::string> {};

// Float output within 1e-4 of PyTorch (relative to max(1, |value|): pixels are O(1)).
TEST_P(VqGoldenTest, FloatPixelsMatchPyTorch) {
  const Golden g = LoadGolden(GetParam());
  auto decoder = OpenDecoder(g.checkpoint_dir);
  ASSERT_NE(decoder, nullptr);
  ASSERT_EQ(decoder->image_size(), g.image_size);
  const size_t per_image = 3 * static_cast<size_t>(g.image_size) * g.image_size;
  double max_err = 0;
  std::vector<float> chw;
  for (size_t i = 0; i < g.grids.size(); ++i) {
    ASSERT_TRUE(decoder->DecodeToFloat(g.grids[i], &chw).ok());
    ASSERT_EQ(chw.size(), per_image);
    for (size_t p = 0; p < per_image; ++p) {
      const double want = g.pixels[i * per_image + p];
      const double err = std::abs(chw[p] - want) / std::max(1.0, std::abs(want));
      max_err = std::max(max_err, err);
      ASSERT_LE(err, 1e-4) << "grid " << i << " value " << p << ": " << chw[p] << " vs " << want;
    }
  }
  std::cout << GetParam() << ": max relative error " << max_err << "\n";
}

// RGB8 of the whole batch in one call: equal to PyTorch's except that a value
// whose float sits within float error of an integer boundary may truncate to
// the neighbour (off by one); at most 0.5% of values may do so.
TEST_P(VqGoldenTest, BatchedRgb8MatchesPyTorch) {
  const Golden g = LoadGolden(GetParam());
  auto decoder = OpenDecoder(g.checkpoint_dir);
  ASSERT_NE(decoder, nullptr);
  auto images = decoder->Decode(g.grids);
  ASSERT_TRUE(images.ok()) << images.status();
  ASSERT_EQ(images->size(), g.grids.size());
  const size_t per_image = 3 * static_cast<size_t>(g.image_size) * g.image_size;
  size_t off_by_one = 0;
  for (size_t i = 0; i < images->size(); ++i) {
    const engine::RgbImage& img = (*images)[i];
    ASSERT_EQ(img.width, g.image_size);
    ASSERT_EQ(img.height, g.image_size);
    ASSERT_EQ(img.rgb.size(), per_image);
    for (size_t p = 0; p < per_image; ++p) {
      const int diff = std::abs(int{img.rgb[p]} - int{g.rgb8[i * per_image + p]});
      ASSERT_LE(diff, 1) << "grid " << i << " byte " << p;
      off_by_one += diff;
    }
  }
  EXPECT_LE(off_by_one, g.rgb8.size() / 200) << off_by_one << " values off by one";
}

// Concurrent callers serialise on the scratch and get the same bytes.
TEST_P(VqGoldenTest, ConcurrentDecodesAgree) {
  const Golden g = LoadGolden(GetParam());
  auto decoder = OpenDecoder(g.checkpoint_dir);
  ASSERT_NE(decoder, nullptr);
  auto reference = decoder->Decode(g.grids);
  ASSERT_TRUE(reference.ok());
  std::vector<std::vector<engine::RgbImage>> results(4);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < results.size(); ++t) {
    threads.emplace_back([&, t] {
      auto r = decoder->Decode(g.grids);
      if (r.ok()) results[t] = std::move(*r);
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& r : results) {
    ASSERT_EQ(r.size(), reference->size());
    for (size_t i = 0; i < r.size(); ++i) EXPECT_EQ(r[i].rgb, (*reference)[i].rgb);
  }
}

INSTANTIATE_TEST_SUITE_P(TinyCheckpoints, VqGoldenTest, ::testing::Values("tiny-mha", "tiny-gqa-sharded"),
                         [](const auto& info) { return info.param == "tiny-mha" ? "Mha" : "GqaSharded"; });

class VqErrorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = SourceDir() + "/tests/goldens/tiny/tiny-mha";
    decoder_ = OpenDecoder(dir_);
    ASSERT_NE(decoder_, nullptr);
  }
  std::string dir_;
  std::unique_ptr<VqDecoder> decoder_;
};

TEST_F(VqErrorTest, WrongGridLengthNamesGrid) {
  std::vector<std::vector<int32_t>> grids = {std::vector<int32_t>(64, 0), std::vector<int32_t>(63, 0)};
  auto r = decoder_->Decode(grids);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("token grid 1 has 63 tokens, expected 64"), std::string::npos) << r.status();
}

TEST_F(VqErrorTest, OutOfRangeIdsNameGridAndPosition) {
  for (int32_t bad : {-1, 64, 1 << 30}) {
    std::vector<int32_t> grid(64, 5);
    grid[17] = bad;
    auto r = decoder_->Decode({grid});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("token grid 0, position 17: id " + std::to_string(bad)), std::string::npos)
        << r.status();
    std::vector<float> chw;
    EXPECT_FALSE(decoder_->DecodeToFloat(grid, &chw).ok());
  }
}

TEST_F(VqErrorTest, EmptyBatchGivesNoImages) {
  auto r = decoder_->Decode({});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());
}

TEST_F(VqErrorTest, ConfigNotMatchingTheTensorsNamesTheTensor) {
  auto ckpt = checkpoint::Checkpoint::Open(dir_);
  ASSERT_TRUE(ckpt.ok());
  auto config = janus::LoadJanusConfig(dir_);
  ASSERT_TRUE(config.ok());
  vq::Vq16Config wrong = config->gen_vision;
  wrong.z_channels = 64;
  auto r = VqDecoder::Create(**ckpt, wrong);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("gen_vision_model.post_quant_conv.weight"), std::string::npos) << r.status();
}

TEST_F(VqErrorTest, InvalidConfigNamesTheParameter) {
  auto ckpt = checkpoint::Checkpoint::Open(dir_);
  ASSERT_TRUE(ckpt.ok());
  auto config = janus::LoadJanusConfig(dir_);
  ASSERT_TRUE(config.ok());
  vq::Vq16Config bad = config->gen_vision;
  bad.ch_mult = {1, 3};  // 32 * 3 = 96 is a multiple of 32: fine; 48 below is not
  bad.ch = 16;
  auto r = VqDecoder::Create(**ckpt, bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("ch_mult"), std::string::npos) << r.status();
  for (int32_t size : {30, 0, -4, 1 << 20, 1 << 30}) {
    bad = config->gen_vision;
    bad.image_size = size;
    r = VqDecoder::Create(**ckpt, bad);
    ASSERT_FALSE(r.ok()) << size;
    EXPECT_NE(r.status().message().find("image_size"), std::string::npos) << r.status();
  }
  bad = config->gen_vision;
  bad.ch = 1 << 30;
  r = VqDecoder::Create(**ckpt, bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("ch"), std::string::npos) << r.status();
}

}  // namespace
}  // namespace argen::vq
