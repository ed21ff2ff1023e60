// The sweep's PNG writer: libpng's low-level API with a chosen zlib level and
// row filter, encoded once into memory and written with one write. (The
// engine's image::EncodePng uses the simplified API at the default level,
// which encodes every image twice: a sizing pass, then the real one.) At
// hundreds of images per second the encoder is on the sweep's critical path.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace argen::sweep {

struct PngOptions {
  int32_t compression_level = 1;  // zlib 0..9; 1 is several times faster than 6 for ~10% larger files
  bool filter_sub = true;         // the SUB row filter only (libpng's default tries all five per row)
};

absl::StatusOr<std::string> EncodeSweepPng(absl::Span<const uint8_t> rgb, int32_t width, int32_t height,
                                           const PngOptions& options);

// Encodes and writes to path (replacing it); errors name the path.
absl::Status WriteSweepPng(const std::string& path, absl::Span<const uint8_t> rgb, int32_t width, int32_t height,
                           const PngOptions& options);

}  // namespace argen::sweep
