// Timing of engine/image's PNG encoder per setting (zlib level, row filter),
// as the sweep and the server use it: ms and bytes per image.
//
//   argen_bench_png [DIR]
//
// DIR: a folder of PNGs to encode again (e.g. a sweep's dense_0, 192 px model
// images); without one, or when it holds none, eight 192 px scene-like images
// made here. Prints one line per setting; exits 1 when an encode fails.
// (Was SweepPngTest.TimingPerSetting, a timing with no assertion in CI.)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "engine/image/png.h"
#include "tests/support/scene_image.h"

namespace {

namespace fs = std::filesystem;
using argen::image::Rgb8Image;

std::vector<Rgb8Image> BenchImages(const char* dir) {
  std::vector<Rgb8Image> images;
  if (dir != nullptr) {
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() != ".png") continue;
      std::ifstream in(e.path(), std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), {});
      auto img = argen::image::DecodePng(
          absl::Span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
      if (img.ok()) images.push_back(*std::move(img));
    }
  }
  if (images.empty()) {
    for (uint32_t s = 0; s < 8; ++s) images.push_back(argen::test_support::SceneImage(192, s));
  }
  return images;
}

// Encodes every image `reps` times with `options` (nullptr: the defaults) and
// prints the line; false when an encode fails.
bool Time(const std::vector<Rgb8Image>& images, int reps, const std::string& name,
          const argen::image::PngOptions* options) {
  using Clock = std::chrono::steady_clock;
  size_t bytes = 0;
  const Clock::time_point t0 = Clock::now();
  for (int r = 0; r < reps; ++r) {
    for (const Rgb8Image& img : images) {
      absl::StatusOr<std::string> png = options != nullptr
                                            ? argen::image::EncodePng(img.rgb, img.width, img.height, *options)
                                            : argen::image::EncodePng(img.rgb, img.width, img.height);
      if (!png.ok()) {
        std::fprintf(stderr, "png %s: %s\n", name.c_str(), std::string(png.status().message()).c_str());
        return false;
      }
      bytes += png->size();
    }
  }
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  const double n = static_cast<double>(reps) * static_cast<double>(images.size());
  std::printf("png %-26s %6.2f ms/image %7.0f bytes/image (%dx%d)\n", name.c_str(), 1e3 * s / n, bytes / n,
              images[0].width, images[0].height);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<Rgb8Image> images = BenchImages(argc > 1 ? argv[1] : nullptr);
  const int reps = std::max<int>(1, 64 / static_cast<int>(images.size()));
  bool ok = Time(images, reps, "image::EncodePng (default)", nullptr);
  for (int level : {1, 3, 6}) {
    for (bool sub : {false, true}) {
      const argen::image::PngOptions options{level, sub};
      ok = Time(images, reps, "level " + std::to_string(level) + (sub ? " sub" : " all filters"), &options) && ok;
    }
  }
  return ok ? 0 : 1;
}
