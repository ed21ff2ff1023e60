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

#include "absl/status/statusor.h"

#include "engine/families/nextstep/nextstep_config.h"
#include "engine/model/model_spec.h"

namespace argen::nextstep {

inline constexpr char kImageInProjector[] = "image_in_projector";    // token_dim -> hidden_size
inline constexpr char kImageOutProjector[] = "image_out_projector";  // hidden_size -> hidden_size
inline constexpr char kFlowHeadPrefix[] = "image_head.net.";

// The stack (config, text embedding, layers, final norm) alone.
model::ModelSpec NextStepStackSpec(const NextStepConfig& config);

// The whole spec, a vector model (engine/model/step_plan.h "Vector inputs and
// outputs"): stack.qkv_bias; prompts read embed_tokens; decode inputs are
// token vectors through image_in_projector (input.vector_in; no input table:
// nothing is ever forced); the output stage hands image_out_projector(final
// norm(h)) (output.vector_out) to the token head (nextstep_token_head.h),
// token_dim floats a token. Checked (CheckSpec); errors name config.json.
absl::StatusOr<model::ModelSpec> NextStepSpec(const NextStepConfig& config);

// image_in_projector and image_out_projector, both with biases.
model::LinearRef ImageInProjector(const NextStepConfig& config);
model::LinearRef ImageOutProjector(const NextStepConfig& config);

}  // namespace argen::nextstep
