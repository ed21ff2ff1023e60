// The Janus-Pro tensor map: the ModelSpec (engine/model/model_spec.h) of a
// Janus-Pro config, naming every tensor text-to-image generation reads by its
// official name (janus/models/modeling_vlm.py, projector.py, vq_model.py) with
// the shape the config implies. The Llama decoder (language_model.model.*),
// gen_embed -> gen_aligner (Linear, GELU, Linear) as the input stage,
// gen_head (output_mlp_projector, GELU, vision_head) as the output stage, and
// the VQ-16 decoder's gen_vision_model.* for validation. vision_model.*,
// aligner.*, lm_head and the VQ encoder are never needed and never checked.
// The same map validates a checkpoint and loads it on every device.
#pragma once

#include "absl/status/statusor.h"
#include "engine/families/janus/janus_config.h"
#include "engine/model/model_spec.h"

namespace argen::janus {

// Errors name the config field that makes the model unusable for generation.
absl::StatusOr<model::ModelSpec> JanusSpec(const JanusConfig& config);

}  // namespace argen::janus
