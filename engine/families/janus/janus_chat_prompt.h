// The text-to-image prompt exactly as Janus-Pro's official generation code
// builds it (deepseek-ai/Janus README / generation_inference.py): the
// "deepseek" SFT template with an empty system prompt over the conversation
// [<|User|>: caption, <|Assistant|>: ""], then the image start tag; ids with
// BOS. The classifier-free-guidance row is the same ids with every token but
// the first and the last replaced by the pad token; with a negative prompt
// (argen's extension: the official code has none) it is the negative prompt's
// own generation prompt, built the same way as the caption's.
//
// A model trained with a system prompt (config.json extension key
// "argen_system_prompt", docs/checkpoint-format.md) is prompted with the same
// template's non-empty case: "{system_prompt}\n\n" before the user turn. The
// default, an empty system prompt, is the official generation prompt.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tokenizer/tokenizer.h"

namespace argen::janus {

// Token contents of the Janus-Pro tokenizer (looked up by content, never by id).
inline constexpr char kBosToken[] = "<｜begin▁of▁sentence｜>";
inline constexpr char kPadToken[] = "<｜▁pad▁｜>";
inline constexpr char kImageStartToken[] = "<begin_of_image>";
inline constexpr char kUserRole[] = "<|User|>";
inline constexpr char kAssistantRole[] = "<|Assistant|>";

struct PromptIds {
  std::vector<int32_t> cond;    // BOS, chat prompt, <begin_of_image>
  std::vector<int32_t> uncond;  // same length: cond[0], pad..., cond.back()
};

// The prompt text before tokenization (without BOS).
std::string GenerationPromptText(std::string_view caption, std::string_view system_prompt = {});

// Errors: empty (or all-whitespace) caption; prompt longer than
// max_prompt_tokens ids (BOS included; <= 0 means no limit); invalid UTF-8;
// a required special token missing from the tokenizer.
absl::StatusOr<PromptIds> BuildGenerationPrompt(const tokenizer::Tokenizer& tokenizer, std::string_view caption,
                                                int32_t max_prompt_tokens, std::string_view system_prompt = {});

// The guidance row for `negative_prompt`: BuildGenerationPrompt's cond ids of
// it. Errors as BuildGenerationPrompt's, naming negative_prompt.
absl::StatusOr<std::vector<int32_t>> BuildNegativePrompt(const tokenizer::Tokenizer& tokenizer,
                                                         std::string_view negative_prompt, int32_t max_prompt_tokens,
                                                         std::string_view system_prompt = {});

}  // namespace argen::janus
