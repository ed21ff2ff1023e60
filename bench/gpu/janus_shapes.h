// Janus-Pro-1B and -7B generation shapes (official config.json values).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "engine/model/backend.h"

namespace argen::bench {

inline constexpr int kJanusImageTokens = 576;  // 384x384 at 1/16

absl::StatusOr<model::ModelDims> JanusDims(const std::string& name);  // "1b" or "7b"

}  // namespace argen::bench
