// A checkpoint's own sampling defaults: config.json may carry
// "argen_sampling_defaults": {"cfg_weight": 3.0, "temperature": 1.0,
// "top_k": 0, "top_p": 1.0} (any subset), which replace the family's
// published defaults for that model (engine::ModelInfo::default_sampling).
// A model trained with a guidance weight of its own (the shipped
// argen-scenes-v1: cfg 3, docs/model.md) then gets it from every front end
// that takes the model's defaults (argen_server without a config value,
// argen_generate), not from one config file.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "engine/engine.h"

namespace argen::families {

// Applies <model_dir>/config.json's "argen_sampling_defaults" onto
// `defaults`; no key: unchanged. Errors name the file and the field (a
// non-object, an unknown field, a value out of its range).
absl::Status ApplyCheckpointSamplingDefaults(const std::string& model_dir, engine::SamplingParams& defaults);

}  // namespace argen::families
