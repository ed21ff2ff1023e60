// RGB8 images to PNG (libpng's simplified API), in memory or to a file, and
// back (for tests and clients that check what the server sent).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace argen::image {

struct Rgb8Image {
  int32_t width = 0, height = 0;
  std::vector<uint8_t> rgb;  // row-major, 3 bytes a pixel
};

// PNG file bytes of a width x height RGB8 image (rgb.size() == width * height * 3).
absl::StatusOr<std::string> EncodePng(absl::Span<const uint8_t> rgb, int32_t width, int32_t height);

// Encodes and writes to path (replacing it); errors name the path.
absl::Status WritePngFile(const std::string& path, absl::Span<const uint8_t> rgb, int32_t width, int32_t height);

// Decodes any PNG to RGB8 (alpha dropped, gray expanded); errors for corrupt data.
absl::StatusOr<Rgb8Image> DecodePng(absl::Span<const uint8_t> png_bytes);

}  // namespace argen::image
