// The Janus-Pro family (deepseek-ai/Janus; model_type "multi_modality"): its
// config (janus_config.h), tensor map (janus_spec.h), chat-format prompt with
// the official guidance row (janus_chat_prompt.h, janus_prompt.cc) and the
// VQ-16 image decoder (engine/vq, engine/vq_cuda).
// Decode: 576 image codes per 384 px image (24 x 24), none forced.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "engine/families/family.h"
#include "engine/model/generic_engine.h"

namespace argen::janus {

families::Family JanusFamily();

// The FamilyModel of a Janus-Pro checkpoint directory (config.json; the
// tokenizer.json is read by make_prompt only).
absl::StatusOr<families::FamilyModel> LoadJanus(const std::string& model_dir);

// The official Janus chat-format generation prompt (cond) and its CFG
// unconditional twin from <model_dir>/tokenizer.json; `system_prompt` is the
// model's config.json argen_system_prompt ("" for the official prompt).
absl::StatusOr<model::PromptEncoder> TokenizerPromptEncoder(const std::string& model_dir,
                                                            const std::string& system_prompt = "");

}  // namespace argen::janus
