// Writes an RGB8 image as PNG (libpng). Local to the tool until the engine's
// PNG encoder (engine/image) is available to tools.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "tools/characterize/attention_map.h"

namespace argen::characterize {

absl::Status WritePng(const Rgb8Image& image, const std::string& path);

}  // namespace argen::characterize
