// Building a GenericEngine from a checkpoint directory (engine/engine_factory.cc):
// the registry (engine/families/registry.h) picks the family from config.json,
// the family's tensor map is validated against the checkpoint and loaded by
// the chosen backend, and the family's prompt recipe and image decoder are
// bound. engine::CreateEngine is this with the family's own prompt encoder;
// tools that need the concrete engine (e.g. to reach the CPU backend's
// attention observer) call CreateGenericEngine.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "engine/model/generic_engine.h"

namespace argen::model {

// Prompt tokens a request may have (also bounded by max_position_embeddings - the
// longest size's image_tokens).
inline constexpr int32_t kDefaultMaxPromptTokens = 1024;

// encoder == nullptr: the family's prompt recipe (e.g. Janus' chat format over
// the checkpoint's tokenizer.json). A given encoder is the default size's;
// requests naming another size use the family's recipe of that size.
absl::StatusOr<std::unique_ptr<GenericEngine>> CreateGenericEngine(const engine::EngineOptions& options,
                                                                   PromptEncoder encoder = nullptr);

}  // namespace argen::model
