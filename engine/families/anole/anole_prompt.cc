#include "engine/families/anole/anole_prompt.h"

#include "absl/strings/str_cat.h"

namespace argen::anole {
namespace {

// <s> text <reserved08706> <racm3:break>; `field` names the request field in errors.
absl::StatusOr<std::vector<int32_t>> Turn(const tokenizer::Tokenizer& tokenizer, const AnoleTokenIds& special,
                                          std::string_view text, const char* field, int32_t max_prompt_tokens) {
  if (text.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": is empty"));
  absl::StatusOr<std::vector<int32_t>> ids = tokenizer.Encode(text, /*add_special_tokens=*/false);
  if (!ids.ok()) return absl::InvalidArgumentError(absl::StrCat(field, ": ", ids.status().message()));
  std::vector<int32_t> out;
  out.reserve(ids->size() + 3);
  out.push_back(special.bos);
  out.insert(out.end(), ids->begin(), ids->end());
  out.push_back(special.end_of_turn);
  out.push_back(special.begin_image);
  if (max_prompt_tokens > 0 && static_cast<int64_t>(out.size()) > max_prompt_tokens) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": gives ", out.size(), " prompt tokens, over the limit of ", max_prompt_tokens));
  }
  return out;
}

}  // namespace

absl::StatusOr<AnoleTokenIds> FindAnoleTokens(const tokenizer::Tokenizer& tokenizer) {
  AnoleTokenIds ids;
  for (auto [content, out] :
       {std::pair{kBosToken, &ids.bos}, std::pair{kEndOfTurnToken, &ids.end_of_turn},
        std::pair{kBeginImageToken, &ids.begin_image}, std::pair{kEndImageToken, &ids.end_image}}) {
    std::optional<int32_t> id = tokenizer.TokenToId(content);
    if (!id) {
      return absl::FailedPreconditionError(
          absl::StrCat(tokenizer.source(), ": token \"", content, "\" needed by the Anole prompt is missing"));
    }
    *out = *id;
  }
  return ids;
}

absl::StatusOr<AnolePromptIds> BuildAnolePrompt(const tokenizer::Tokenizer& tokenizer, std::string_view caption,
                                                std::string_view negative_prompt, int32_t max_prompt_tokens) {
  absl::StatusOr<AnoleTokenIds> special = FindAnoleTokens(tokenizer);
  if (!special.ok()) return special.status();
  AnolePromptIds out;
  absl::StatusOr<std::vector<int32_t>> cond = Turn(tokenizer, *special, caption, "prompt", max_prompt_tokens);
  if (!cond.ok()) return cond.status();
  out.cond = *std::move(cond);
  if (negative_prompt.empty()) {
    out.uncond = {special->bos, special->begin_image};
    return out;
  }
  absl::StatusOr<std::vector<int32_t>> uncond =
      Turn(tokenizer, *special, negative_prompt, "negative_prompt", max_prompt_tokens);
  if (!uncond.ok()) return uncond.status();
  out.uncond = *std::move(uncond);
  return out;
}

}  // namespace argen::anole
