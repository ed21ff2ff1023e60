// The published Janus-Pro-1B and -7B configs (deepseek-ai/Janus-Pro-*
// config.json values), for benchmarks that run these shapes with random
// weights and no checkpoint.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "engine/families/janus/janus_config.h"

namespace argen::janus {

// "1b" or "7b"; 384 px, 576 image codes of 16384.
absl::StatusOr<JanusConfig> PublishedJanusConfig(const std::string& name);

}  // namespace argen::janus
