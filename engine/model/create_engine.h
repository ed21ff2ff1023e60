// Building a GenericEngine from a checkpoint directory (engine/engine_factory.cc).
// engine::CreateEngine is this with the checkpoint's tokenizer.json as the
// prompt encoder; tools that need the concrete engine (e.g. to reach the CPU
// backend's attention observer) call CreateGenericEngine.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "engine/model/generic_engine.h"

namespace argen::model {

// Prompt tokens a request may have (also bounded by max_position_embeddings - image_tokens).
inline constexpr int32_t kDefaultMaxPromptTokens = 1024;

// The official Janus chat-format generation prompt (cond) and its CFG
// unconditional twin from <model_dir>/tokenizer.json.
absl::StatusOr<PromptEncoder> TokenizerPromptEncoder(const std::string& model_dir);

// encoder == nullptr: the chat-format prompt of the checkpoint's tokenizer.json.
absl::StatusOr<std::unique_ptr<GenericEngine>> CreateGenericEngine(
    const engine::EngineOptions& options, PromptEncoder encoder = nullptr);

}  // namespace argen::model
