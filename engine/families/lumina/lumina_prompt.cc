#include "engine/families/lumina/lumina_prompt.h"

#include <cstdio>

#include "absl/strings/str_cat.h"

namespace argen::lumina {

using tokenizer::Tokenizer;

namespace {

// Debian's Abseil has its own string_view type.
absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

absl::StatusOr<int32_t> RequireToken(const Tokenizer& tokenizer, std::string_view content) {
  auto id = tokenizer.TokenToId(content);
  if (!id) {
    return absl::FailedPreconditionError(
        absl::StrCat(tokenizer.source(), ": token \"", Sv(content), "\" needed by the Lumina-mGPT prompt is missing"));
  }
  return *id;
}

}  // namespace

std::string LuminaResolutionToken(int32_t units) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "<reserved%05d>", 8800 + units);
  return buf;
}

std::string LuminaPromptText(std::string_view caption, int32_t width, int32_t height) {
  return absl::StrCat("Generate an image of ", width, "x", height, " according to the following prompt:\n", Sv(caption),
                      kLuminaEndOfTurnToken);
}

absl::StatusOr<LuminaTokenIds> FindLuminaTokens(const Tokenizer& tokenizer) {
  LuminaTokenIds ids;
  for (auto [content, out] :
       {std::pair{kChameleonBosToken, &ids.bos}, std::pair{kLuminaEndOfTurnToken, &ids.end_of_turn},
        std::pair{kChameleonBeginImageToken, &ids.begin_image}, std::pair{kChameleonEndImageToken, &ids.end_image},
        std::pair{kLuminaNewLineToken, &ids.new_line}}) {
    auto id = RequireToken(tokenizer, content);
    if (!id.ok()) return id.status();
    *out = *id;
  }
  return ids;
}

absl::StatusOr<LuminaPromptIds> BuildLuminaPrompt(const Tokenizer& tokenizer, std::string_view caption, int32_t width,
                                                  int32_t height, int32_t max_prompt_tokens) {
  if (caption.empty()) return absl::InvalidArgumentError("prompt: caption is empty");
  for (auto [name, pixels] : {std::pair{"width", width}, std::pair{"height", height}}) {
    if (pixels <= 0 || pixels % kLuminaPatchPixels != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("prompt: ", name, " ", pixels, " is not a positive multiple of ", kLuminaPatchPixels));
    }
  }
  auto special = FindLuminaTokens(tokenizer);
  if (!special.ok()) return special.status();
  auto h = RequireToken(tokenizer, LuminaResolutionToken(height / kLuminaPatchPixels));
  if (!h.ok()) return h.status();
  auto w = RequireToken(tokenizer, LuminaResolutionToken(width / kLuminaPatchPixels));
  if (!w.ok()) return w.status();

  // Lumina-mGPT's tokenizer wrapper encodes without special tokens and puts
  // the BOS in front itself; so do we.
  auto text_ids = tokenizer.Encode(LuminaPromptText(caption, width, height), /*add_special_tokens=*/false);
  if (!text_ids.ok()) return absl::InvalidArgumentError(absl::StrCat("prompt: ", text_ids.status().message()));
  LuminaPromptIds out;
  out.cond.reserve(text_ids->size() + 1);
  out.cond.push_back(special->bos);
  out.cond.insert(out.cond.end(), text_ids->begin(), text_ids->end());
  if (max_prompt_tokens > 0 && static_cast<int64_t>(out.cond.size()) > max_prompt_tokens) {
    return absl::InvalidArgumentError(absl::StrCat("prompt: caption gives ", out.cond.size(),
                                                   " prompt tokens, over the limit of ", max_prompt_tokens));
  }
  out.header = {special->begin_image, *h, *w};
  return out;
}

}  // namespace argen::lumina
