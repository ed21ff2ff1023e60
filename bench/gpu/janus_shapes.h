// Janus-Pro-1B and -7B generation shapes (the published config.json values)
// as the Janus family's ModelSpec, for random-weight benchmarks.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "engine/model/model_spec.h"

namespace argen::bench {

inline constexpr int kJanusImageTokens = 576;  // 384x384 at 1/16

absl::StatusOr<model::ModelSpec> JanusSpec(const std::string& name);  // "1b" or "7b"

}  // namespace argen::bench
