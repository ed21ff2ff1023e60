// PNG round trips through libpng's reader (and a raw chunk check), plus
// every error path of the encoder and decoder.
#include "engine/image/png.h"

#include <gtest/gtest.h>
#include <png.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace argen::image {
namespace {

std::vector<uint8_t> RandomRgb(int w, int h, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> rgb(static_cast<size_t>(w) * h * 3);
  for (uint8_t& v : rgb) v = static_cast<uint8_t>(rng());
  return rgb;
}

// Decodes with libpng directly, independent of DecodePng.
std::vector<uint8_t> DecodeWithLibpng(const std::string& bytes, int* w, int* h) {
  png_image image;
  std::memset(&image, 0, sizeof(image));
  image.version = PNG_IMAGE_VERSION;
  EXPECT_TRUE(png_image_begin_read_from_memory(&image, bytes.data(), bytes.size())) << image.message;
  EXPECT_EQ(image.format & PNG_FORMAT_FLAG_COLOR, PNG_FORMAT_FLAG_COLOR);
  EXPECT_EQ(image.format & PNG_FORMAT_FLAG_ALPHA, 0u);
  image.format = PNG_FORMAT_RGB;
  std::vector<uint8_t> out(PNG_IMAGE_SIZE(image));
  EXPECT_TRUE(png_image_finish_read(&image, nullptr, out.data(), 0, nullptr)) << image.message;
  *w = static_cast<int>(image.width);
  *h = static_cast<int>(image.height);
  return out;
}

TEST(PngTest, RoundTripsPixelsExactly) {
  for (auto [w, h] : {std::pair{1, 1}, std::pair{3, 5}, std::pair{384, 384}, std::pair{17, 2}}) {
    const std::vector<uint8_t> rgb = RandomRgb(w, h, static_cast<uint32_t>(w * 1000 + h));
    auto png = EncodePng(rgb, w, h);
    ASSERT_TRUE(png.ok()) << png.status();
    ASSERT_GE(png->size(), 8u);
    EXPECT_EQ(png->substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
    int dw = 0, dh = 0;
    EXPECT_EQ(DecodeWithLibpng(*png, &dw, &dh), rgb);
    EXPECT_EQ(dw, w);
    EXPECT_EQ(dh, h);
    auto decoded = DecodePng(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(png->data()), png->size()));
    ASSERT_TRUE(decoded.ok()) << decoded.status();
    EXPECT_EQ(decoded->rgb, rgb);
  }
}

TEST(PngTest, HeaderSaysRgb8) {
  const std::vector<uint8_t> rgb = RandomRgb(7, 3, 1);
  auto png = EncodePng(rgb, 7, 3);
  ASSERT_TRUE(png.ok()) << png.status();
  // IHDR: length(4) "IHDR" width(4) height(4) bit depth(1) colour type(1).
  const std::string& b = *png;
  ASSERT_EQ(b.substr(12, 4), "IHDR");
  const auto be32 = [&](size_t at) {
    return (static_cast<uint32_t>(static_cast<uint8_t>(b[at])) << 24) | (static_cast<uint8_t>(b[at + 1]) << 16) |
           (static_cast<uint8_t>(b[at + 2]) << 8) | static_cast<uint8_t>(b[at + 3]);
  };
  EXPECT_EQ(be32(16), 7u);
  EXPECT_EQ(be32(20), 3u);
  EXPECT_EQ(static_cast<uint8_t>(b[24]), 8);  // bit depth
  EXPECT_EQ(static_cast<uint8_t>(b[25]), 2);  // colour type 2: truecolour RGB
}

TEST(PngTest, WritesFile) {
  const std::string path =
      (std::filesystem::temp_directory_path() / ("argen_png_test_" + std::to_string(::getpid()) + ".png")).string();
  const std::vector<uint8_t> rgb = RandomRgb(9, 4, 2);
  ASSERT_TRUE(WritePngFile(path, rgb, 9, 4).ok());
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::filesystem::remove(path);
  int w = 0, h = 0;
  EXPECT_EQ(DecodeWithLibpng(ss.str(), &w, &h), rgb);

  auto bad = WritePngFile("/nonexistent-dir/x.png", rgb, 9, 4);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("/nonexistent-dir/x.png"), std::string::npos) << bad;
}

TEST(PngTest, RejectsBadShapes) {
  const std::vector<uint8_t> rgb(12);
  EXPECT_FALSE(EncodePng(rgb, 0, 4).ok());
  EXPECT_FALSE(EncodePng(rgb, -2, -2).ok());
  auto wrong = EncodePng(rgb, 3, 3);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("27"), std::string::npos) << wrong.status();
  EXPECT_TRUE(EncodePng(rgb, 2, 2).ok());
}

TEST(PngTest, EveryCompressionSettingRoundTripsAndBadLevelsAreRejected) {
  const std::vector<uint8_t> rgb = RandomRgb(24, 17, 5);
  for (int32_t level = 0; level <= 9; ++level) {
    for (bool sub : {false, true}) {
      auto png = EncodePng(rgb, 24, 17, PngOptions{level, sub});
      ASSERT_TRUE(png.ok()) << png.status();
      auto back = DecodePng(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(png->data()), png->size()));
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ(back->rgb, rgb) << "level " << level << " sub " << sub;
    }
  }
  for (int32_t level : {-1, 10}) {
    auto bad = EncodePng(rgb, 24, 17, PngOptions{level, true});
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(bad.status().message().find("compression level"), std::string::npos) << bad.status();
  }
  // Encode errors from WritePngFile name the path too.
  auto bad_file = WritePngFile("/tmp/argen-png-test-never-written.png", rgb, 5, 5);
  ASSERT_FALSE(bad_file.ok());
  EXPECT_NE(bad_file.message().find("argen-png-test-never-written.png"), std::string::npos) << bad_file;
}

TEST(PngTest, DecodeRejectsCorruptData) {
  const std::string junk = "definitely not a png";
  EXPECT_FALSE(DecodePng(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(junk.data()), junk.size())).ok());
  const std::vector<uint8_t> rgb = RandomRgb(32, 32, 3);
  auto png = EncodePng(rgb, 32, 32);
  ASSERT_TRUE(png.ok());
  const std::string truncated = png->substr(0, png->size() / 2);
  EXPECT_FALSE(
      DecodePng(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(truncated.data()), truncated.size())).ok());
}

}  // namespace
}  // namespace argen::image
