// The NextStep-1 family (stepfun-ai/NextStep-1-Large; docs/nextstep.md):
// recognised by config.json's model_type "nextstep". Loading checks the
// whole published layout (config.json, tokenizer.json and its image tokens,
// the tensor map as a vector model, vae/config.json) and then refuses with
// UNIMPLEMENTED: the pieces run on the CPU backend (nextstep_spec.h,
// nextstep_token_head.h, nextstep_vae.h), but the generic engine has no
// decode loop for vector tokens yet, so the server cannot serve it (#31).
#pragma once

#include "engine/families/family.h"

namespace argen::nextstep {

families::Family NextStepFamily();

}  // namespace argen::nextstep
