// engine/image's PNG encoder as the sweep uses it: every zlib level and filter choice decodes back to
// the same pixels (engine/image's decoder), and bad input is an error naming the
// path. The timing per setting is bench/sweep's argen_bench_png.
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "engine/image/png.h"
#include "gtest/gtest.h"
#include "tests/support/scene_image.h"

namespace argen::sweep {
namespace {

namespace fs = std::filesystem;

TEST(SweepPngTest, EveryLevelRoundTrips) {
  const image::Rgb8Image img = test_support::SceneImage(37, 1);  // odd size: row strides matter
  for (int level = 0; level <= 9; ++level) {
    for (bool sub : {false, true}) {
      absl::StatusOr<std::string> png = image::EncodePng(img.rgb, img.width, img.height, {level, sub});
      ASSERT_TRUE(png.ok()) << png.status();
      auto back =
          image::DecodePng(absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(png->data()), png->size()));
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ(back->width, img.width);
      EXPECT_EQ(back->height, img.height);
      EXPECT_EQ(back->rgb, img.rgb) << "level " << level << " sub " << sub;
    }
  }
}

TEST(SweepPngTest, WritesAFileAndNamesThePathOnErrors) {
  const fs::path dir = fs::temp_directory_path() / ("argen_sweep_png_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const image::Rgb8Image img = test_support::SceneImage(16, 2);
  ASSERT_TRUE(image::WritePngFile((dir / "a.png").string(), img.rgb, 16, 16, {}).ok());
  std::ifstream in(dir / "a.png", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  auto back = image::DecodePng(absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->rgb, img.rgb);

  const absl::Status missing = image::WritePngFile((dir / "no" / "b.png").string(), img.rgb, 16, 16, {});
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("no/b.png"), std::string::npos) << missing;
  EXPECT_FALSE(image::WritePngFile((dir / "c.png").string(), img.rgb, 15, 16, {}).ok());  // wrong buffer size
  EXPECT_FALSE(image::EncodePng(img.rgb, 16, 16, {10, true}).ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace argen::sweep
