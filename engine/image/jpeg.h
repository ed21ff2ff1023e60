// RGB8 images to baseline JPEG in memory (libjpeg-turbo from Debian) and
// back, for the HTTP API's output_format "jpeg".
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/image/png.h"

namespace argen::image {

// JPEG file bytes of a width x height RGB8 image at `quality` (0-100; 4:2:0
// chroma below 90, 4:4:4 from 90). InvalidArgument for a bad shape or quality.
absl::StatusOr<std::string> EncodeJpeg(absl::Span<const uint8_t> rgb, int32_t width, int32_t height,
                                       int32_t quality = 90);

// Decodes a JPEG to RGB8; errors for corrupt data.
absl::StatusOr<Rgb8Image> DecodeJpeg(absl::Span<const uint8_t> jpeg_bytes);

}  // namespace argen::image
