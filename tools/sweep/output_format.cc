#include "tools/sweep/output_format.h"

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "tools/sweep/manifest.h"

namespace argen::sweep {
namespace {

namespace fs = std::filesystem;

std::string Padded(int32_t value, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%0*d", digits, value);
  return buf;
}

absl::Status WritePng(const fs::path& path, const engine::RgbImage& img, const image::PngOptions& png) {
  return image::WritePngFile(path.string(), img.rgb, img.width, img.height, png);
}

}  // namespace

std::string_view OutputFormatName(OutputFormat format) {
  switch (format) {
    case OutputFormat::kDefault:
      return "default";
    case OutputFormat::kGeneval:
      return "geneval";
    case OutputFormat::kDpg:
      return "dpg";
  }
  return "unknown";
}

absl::StatusOr<OutputFormat> ParseOutputFormat(std::string_view name) {
  for (OutputFormat f : {OutputFormat::kDefault, OutputFormat::kGeneval, OutputFormat::kDpg}) {
    if (name == OutputFormatName(f)) return f;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--format \"", std::string(name), "\" is not known; expected default, geneval or dpg"));
}

absl::StatusOr<engine::RgbImage> TileTwoByTwo(const std::vector<engine::RgbImage>& images) {
  if (images.empty() || static_cast<int32_t>(images.size()) > kDpgMaxImages) {
    return absl::InvalidArgumentError(absl::StrCat("a 2 x 2 grid takes 1 to 4 images, got ", images.size()));
  }
  const int32_t w = images[0].width, h = images[0].height;
  for (const engine::RgbImage& img : images) {
    if (img.width != w || img.height != h || img.rgb.size() != static_cast<size_t>(w) * h * 3) {
      return absl::InvalidArgumentError("a 2 x 2 grid takes images of one size");
    }
  }
  engine::RgbImage grid;
  grid.width = 2 * w;
  grid.height = 2 * h;
  grid.rgb.assign(static_cast<size_t>(grid.width) * grid.height * 3, 0);
  for (size_t i = 0; i < images.size(); ++i) {
    const int32_t x0 = static_cast<int32_t>(i % 2) * w, y0 = static_cast<int32_t>(i / 2) * h;
    for (int32_t y = 0; y < h; ++y) {
      const uint8_t* src = images[i].rgb.data() + static_cast<size_t>(y) * w * 3;
      std::copy(src, src + static_cast<size_t>(w) * 3,
                grid.rgb.begin() + (static_cast<size_t>(y0 + y) * grid.width + x0) * 3);
    }
  }
  return grid;
}

absl::StatusOr<std::vector<std::string>> WriteRequestFiles(OutputFormat format, const std::string& config_dir,
                                                           const BenchmarkPrompt& prompt,
                                                           const std::vector<engine::RgbImage>& images,
                                                           const image::PngOptions& png) {
  const fs::path dir(config_dir);
  std::vector<std::string> paths;
  switch (format) {
    case OutputFormat::kDefault:
      for (size_t i = 0; i < images.size(); ++i) {
        const std::string name = ImageFileName(prompt.index, static_cast<int32_t>(i));
        if (absl::Status s = WritePng(dir / name, images[i], png); !s.ok()) return s;
        paths.push_back(name);
      }
      return paths;
    case OutputFormat::kGeneval: {
      const fs::path folder = Padded(prompt.index, 5);
      std::error_code ec;
      fs::create_directories(dir / folder / "samples", ec);
      if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create ", (dir / folder / "samples").string()));
      {
        std::ofstream out(dir / folder / "metadata.jsonl", std::ios::binary);
        out << prompt.metadata_line << "\n";
        if (!out) return absl::DataLossError(absl::StrCat("cannot write ", (dir / folder / "metadata.jsonl").string()));
      }
      for (size_t i = 0; i < images.size(); ++i) {
        const fs::path path = folder / "samples" / (Padded(static_cast<int32_t>(i), 4) + ".png");
        if (absl::Status s = WritePng(dir / path, images[i], png); !s.ok()) return s;
        paths.push_back(path.string());
      }
      return paths;
    }
    case OutputFormat::kDpg: {
      absl::StatusOr<engine::RgbImage> grid =
          images.size() == 1 ? absl::StatusOr<engine::RgbImage>(images[0]) : TileTwoByTwo(images);
      if (!grid.ok()) return absl::InvalidArgumentError(absl::StrCat("--format dpg: ", grid.status().message()));
      if (images[0].width != images[0].height) {
        return absl::InvalidArgumentError(absl::StrCat("--format dpg: DPG-Bench crops square cells; the images are ",
                                                       images[0].width, "x", images[0].height));
      }
      const std::string name = prompt.name + ".png";
      if (absl::Status s = WritePng(dir / name, *grid, png); !s.ok()) return s;
      paths.assign(images.size(), name);
      return paths;
    }
  }
  return absl::InternalError("unknown output format");
}

}  // namespace argen::sweep
