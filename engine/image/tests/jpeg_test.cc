// JPEG encoding (libjpeg-turbo): round trip within JPEG's loss, bad input is
// an error (never libjpeg's exit()), corrupt data fails to decode cleanly.
#include "engine/image/jpeg.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace argen::image {
namespace {

std::vector<uint8_t> Gradient(int w, int h) {
  std::vector<uint8_t> rgb(static_cast<size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y) {
    for (int x = 0; x < w; ++x) {
      uint8_t* p = &rgb[(static_cast<size_t>(y) * w + x) * 3];
      p[0] = static_cast<uint8_t>(x * 255 / (w - 1));
      p[1] = static_cast<uint8_t>(y * 255 / (h - 1));
      p[2] = 128;
    }
  }
  return rgb;
}

TEST(JpegTest, RoundTripStaysCloseAtHighQuality) {
  const int w = 32, h = 16;
  const std::vector<uint8_t> rgb = Gradient(w, h);
  absl::StatusOr<std::string> jpeg = EncodeJpeg(rgb, w, h, 95);
  ASSERT_TRUE(jpeg.ok()) << jpeg.status();
  ASSERT_GE(jpeg->size(), 4u);
  EXPECT_EQ(static_cast<uint8_t>((*jpeg)[0]), 0xFF);
  EXPECT_EQ(static_cast<uint8_t>((*jpeg)[1]), 0xD8);
  absl::StatusOr<Rgb8Image> back =
      DecodeJpeg(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(jpeg->data()), jpeg->size()));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->width, w);
  EXPECT_EQ(back->height, h);
  double error = 0;
  for (size_t i = 0; i < rgb.size(); ++i) error += std::abs(int(rgb[i]) - int(back->rgb[i]));
  EXPECT_LT(error / rgb.size(), 4.0);
  // Lower quality: smaller file.
  EXPECT_LT(EncodeJpeg(rgb, w, h, 20)->size(), jpeg->size());
}

TEST(JpegTest, BadInputIsAnError) {
  const std::vector<uint8_t> rgb = Gradient(4, 4);
  EXPECT_FALSE(EncodeJpeg(rgb, 4, 5, 90).ok());
  EXPECT_FALSE(EncodeJpeg(rgb, 0, 4, 90).ok());
  EXPECT_FALSE(EncodeJpeg(rgb, 4, 4, 101).ok());
  const std::string garbage = "\xFF\xD8\xFF\xE0 not really a jpeg at all";
  EXPECT_FALSE(DecodeJpeg(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(garbage.data()), garbage.size())).ok());
  std::string cut = *EncodeJpeg(Gradient(16, 16), 16, 16, 90);
  cut.resize(cut.size() / 3);
  // A truncated file decodes with a warning in libjpeg (gray fill) or fails; it never exits.
  (void)DecodeJpeg(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(cut.data()), cut.size()));
}

}  // namespace
}  // namespace argen::image
