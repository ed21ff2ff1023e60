// Anole's text-to-image prompt as its own inference code builds it
// (GAIR-NLP/anole text2image.py -> chameleon/inference/chameleon.py):
// TokenManager.tokens_from_ui gives [<s>] + the caption's ids (the text
// tokenizer adds nothing itself) + the <END-OF-TURN> sentinel
// <reserved08706>; ImageDecoder appends <racm3:break> (begin image) and then
// samples exactly 1,024 image tokens (32 x 32 VQGAN codes, no row breaks, no
// size header) before writing <eoss>. Its guidance (InBatchInstructCFG, text
// scale 3.0, image scale 1.2) takes an image-conditioned row (the prompt's
// <s>, image tokens, <racm3:break> and <eoss> only) and an unconditioned row
// [<s>, <racm3:break>]: for a text-only prompt both are [<s>, <racm3:break>],
// so the mix is plain CFG at 3.0 against that row. Tokens are found by
// content, never by id.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tokenizer/tokenizer.h"

namespace argen::anole {

inline constexpr char kBosToken[] = "<s>";
inline constexpr char kEndOfTurnToken[] = "<reserved08706>";
inline constexpr char kBeginImageToken[] = "<racm3:break>";
inline constexpr char kEndImageToken[] = "<eoss>";

struct AnoleTokenIds {
  int32_t bos = -1, end_of_turn = -1, begin_image = -1, end_image = -1;
};
// FailedPrecondition naming the tokenizer and the first missing token.
absl::StatusOr<AnoleTokenIds> FindAnoleTokens(const tokenizer::Tokenizer& tokenizer);

struct AnolePromptIds {
  std::vector<int32_t> cond;    // <s> caption <reserved08706> <racm3:break>
  std::vector<int32_t> uncond;  // <s> <racm3:break>, or the negative prompt built as the caption is
};

// Errors (InvalidArgument): an empty caption, invalid UTF-8, more than
// max_prompt_tokens cond ids (<= 0: no limit); a negative prompt's errors name
// negative_prompt.
absl::StatusOr<AnolePromptIds> BuildAnolePrompt(const tokenizer::Tokenizer& tokenizer, std::string_view caption,
                                                std::string_view negative_prompt, int32_t max_prompt_tokens);

}  // namespace argen::anole
