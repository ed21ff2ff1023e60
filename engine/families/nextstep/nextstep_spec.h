// NextStep-1's tensor map, by the names the published checkpoint
// (stepfun-ai/NextStep-1-Large) stores: the NextStep module is saved without
// a prefix (embed_tokens, layers.N.*, norm, lm_head, image_in_projector,
// image_out_projector, image_head.net.*).
//
// The decoder stack is Qwen2.5-style: q/k/v projections with biases, o_proj,
// the MLP and the norms without. lm_head is never read (image tokens come
// from the flow-matching head, engine/families/nextstep/flow_head.h).
#pragma once

#include <string>
#include <vector>

#include "engine/families/nextstep/nextstep_config.h"
#include "engine/model/model_spec.h"

namespace argen::nextstep {

inline constexpr char kImageInProjector[] = "image_in_projector";    // token_dim -> hidden_size
inline constexpr char kImageOutProjector[] = "image_out_projector";  // hidden_size -> hidden_size
inline constexpr char kFlowHeadPrefix[] = "image_head.net.";

// The stack (config, text embedding, layers, final norm). The input and output
// stages are the engine's vector stages (image_in_projector, the token head),
// set where the family binds them.
model::ModelSpec NextStepStackSpec(const NextStepConfig& config);

// image_in_projector and image_out_projector, both with biases.
model::LinearRef ImageInProjector(const NextStepConfig& config);
model::LinearRef ImageOutProjector(const NextStepConfig& config);

}  // namespace argen::nextstep
