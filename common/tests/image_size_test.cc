// The one "WxH" parser of the HTTP API and the client.
#include "common/image_size.h"

#include <gtest/gtest.h>

namespace argen {
namespace {

TEST(ImageSizeTest, ParsesWidthByHeight) {
  EXPECT_EQ(ParseImageSize("512x768"), (std::pair<int32_t, int32_t>{512, 768}));
  EXPECT_EQ(ParseImageSize("1x1"), (std::pair<int32_t, int32_t>{1, 1}));
  EXPECT_EQ(ParseImageSize("99999x384"), (std::pair<int32_t, int32_t>{99999, 384}));
}

TEST(ImageSizeTest, RefusesAnythingElse) {
  for (const char* bad : {"", "x", "512", "512x", "x512", "0x512", "512x0", "512x768x2", "512X768", " 512x768",
                          "512x768 ", "+512x768", "-1x5", "512.0x768", "100000x5", "auto", "512x7a8"}) {
    EXPECT_FALSE(ParseImageSize(bad).has_value()) << '"' << bad << '"';
  }
}

}  // namespace
}  // namespace argen
