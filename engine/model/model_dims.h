// ModelDims of a Janus-Pro checkpoint's config.json.
#pragma once

#include "absl/status/statusor.h"
#include "engine/checkpoint/janus_config.h"
#include "engine/model/backend.h"

namespace argen::model {

// Errors name the config field that makes the model unusable for generation.
absl::StatusOr<ModelDims> ModelDimsFromConfig(const checkpoint::JanusConfig& config);

}  // namespace argen::model
