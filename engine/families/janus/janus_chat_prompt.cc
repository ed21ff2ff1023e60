#include "engine/families/janus/janus_chat_prompt.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/unicode_categories.h"
#include "engine/tokenizer/utf8.h"

namespace argen::janus {

using tokenizer::DecodeUtf8;
using tokenizer::EncodeUtf8;
using tokenizer::IsWhiteSpace;
using tokenizer::Tokenizer;

namespace {

// Python's str.isspace(), which str.strip() uses: White_Space plus U+001C..U+001F.
bool IsPythonSpace(char32_t c) { return IsWhiteSpace(c) || (c >= 0x1C && c <= 0x1F); }

// Python's str.strip() on UTF-8 text (invalid UTF-8 is returned unchanged; Encode rejects it).
std::string PythonStrip(std::string_view text) {
  auto cps = DecodeUtf8(text);
  if (!cps.ok()) return std::string(text);
  size_t b = 0, e = cps->size();
  while (b < e && IsPythonSpace((*cps)[b])) ++b;
  while (e > b && IsPythonSpace((*cps)[e - 1])) --e;
  return EncodeUtf8(std::u32string_view(*cps).substr(b, e - b));
}

absl::StatusOr<int32_t> RequireToken(const Tokenizer& tokenizer, std::string_view content) {
  auto id = tokenizer.TokenToId(content);
  if (!id) {
    return absl::FailedPreconditionError(absl::StrCat(tokenizer.source(), ": token \"",
                                                      absl::string_view(content.data(), content.size()),
                                                      "\" needed by the generation prompt is missing"));
  }
  return *id;
}

}  // namespace

std::string GenerationPromptText(std::string_view caption, std::string_view system_prompt) {
  // Conversation.get_prompt() for the "deepseek" style: a non-empty system
  // prompt followed by sep "\n\n", "<role>: <message><sep>" for the user turn,
  // "<role>:" for the empty assistant turn; the caller strips, then appends the tag.
  const std::string system =
      system_prompt.empty() ? "" : absl::StrCat(absl::string_view(system_prompt.data(), system_prompt.size()), "\n\n");
  return absl::StrCat(system, kUserRole, ": ", PythonStrip(caption), "\n\n", kAssistantRole, ":", kImageStartToken);
}

absl::StatusOr<PromptIds> BuildGenerationPrompt(const Tokenizer& tokenizer, std::string_view caption,
                                                int32_t max_prompt_tokens, std::string_view system_prompt) {
  if (PythonStrip(caption).empty()) return absl::InvalidArgumentError("prompt: caption is empty");
  auto bos = RequireToken(tokenizer, kBosToken);
  if (!bos.ok()) return bos.status();
  auto pad = RequireToken(tokenizer, kPadToken);
  if (!pad.ok()) return pad.status();
  if (auto s = RequireToken(tokenizer, kImageStartToken); !s.ok()) return s.status();

  // The official script's tokenizer (LlamaTokenizerFast, add_bos_token) puts
  // exactly BOS in front; we add it explicitly so the result never depends on
  // how a tokenizer.json spells its post-processor.
  auto text_ids = tokenizer.Encode(GenerationPromptText(caption, system_prompt), /*add_special_tokens=*/false);
  if (!text_ids.ok()) return absl::InvalidArgumentError(absl::StrCat("prompt: ", text_ids.status().message()));
  PromptIds out;
  out.cond.reserve(text_ids->size() + 1);
  out.cond.push_back(*bos);
  out.cond.insert(out.cond.end(), text_ids->begin(), text_ids->end());
  if (max_prompt_tokens > 0 && static_cast<int64_t>(out.cond.size()) > max_prompt_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("prompt: caption gives ", out.cond.size(),
                                                   " prompt tokens, over the limit of ", max_prompt_tokens));
  }
  out.uncond = out.cond;
  for (size_t i = 1; i + 1 < out.uncond.size(); ++i) out.uncond[i] = *pad;
  return out;
}

absl::StatusOr<std::vector<int32_t>> BuildNegativePrompt(const Tokenizer& tokenizer, std::string_view negative_prompt,
                                                         int32_t max_prompt_tokens, std::string_view system_prompt) {
  absl::StatusOr<PromptIds> ids = BuildGenerationPrompt(tokenizer, negative_prompt, max_prompt_tokens, system_prompt);
  if (ids.ok()) return std::move(ids->cond);
  if (ids.status().code() != absl::StatusCode::kInvalidArgument) return ids.status();
  absl::string_view message = ids.status().message();
  if (absl::StartsWith(message, "prompt: ")) message.remove_prefix(8);
  return absl::InvalidArgumentError(absl::StrCat("negative_prompt: ", message));
}

}  // namespace argen::janus
