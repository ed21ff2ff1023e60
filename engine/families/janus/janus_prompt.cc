// TokenizerPromptEncoder (engine/families/janus/janus_family.h).
#include <memory>

#include "engine/families/janus/janus_chat_prompt.h"
#include "engine/families/janus/janus_family.h"
#include "engine/tokenizer/tokenizer.h"

namespace argen::janus {

using model::PromptEncoder;

absl::StatusOr<PromptEncoder> TokenizerPromptEncoder(const std::string& model_dir, const std::string& system_prompt) {
  absl::StatusOr<tokenizer::Tokenizer> tok = tokenizer::Tokenizer::LoadFromFile(model_dir + "/tokenizer.json");
  if (!tok.ok()) return tok.status();
  // The tokenizer is immutable and thread-safe, so Prepare() may run concurrently.
  auto shared = std::make_shared<const tokenizer::Tokenizer>(*std::move(tok));
  return PromptEncoder([shared, system_prompt](const model::PromptText& text)
                           -> absl::StatusOr<std::pair<std::vector<int32_t>, std::vector<int32_t>>> {
    // The engine checks the length against max_prompt_tokens itself.
    absl::StatusOr<PromptIds> ids = BuildGenerationPrompt(*shared, text.caption, 0, system_prompt);
    if (!ids.ok()) return ids.status();
    if (!text.negative_prompt.empty()) {
      absl::StatusOr<std::vector<int32_t>> negative =
          BuildNegativePrompt(*shared, text.negative_prompt, 0, system_prompt);
      if (!negative.ok()) return negative.status();
      ids->uncond = *std::move(negative);
    }
    return std::make_pair(std::move(ids->cond), std::move(ids->uncond));
  });
}

}  // namespace argen::janus
