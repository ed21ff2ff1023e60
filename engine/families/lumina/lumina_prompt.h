// The text-to-image prompt as Lumina-mGPT builds it (inference_solver.py with
// its FlexARItemProcessor and Conversation template): the human turn
// "Generate an image of {W}x{H} according to the following prompt:\n{caption}"
// followed by the end-of-turn token <reserved08706>, with the tokenizer's BOS
// <s> in front and no assistant text. The image then starts with
// <racm3:break> and the two resolution tokens, height first, each
// <reserved{8800 + n}> with n = pixels / 32 (one unit is 2 x 2 VQGAN codes).
// Lumina-mGPT's model samples those three header tokens; a server forces them
// (the request fixes the size). The classifier-free-guidance row has no text:
// its whole prompt is that header (Lumina-mGPT starts its unconditional cache
// at <racm3:break>). Tokens are found by content, never by id.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tokenizer/tokenizer.h"

namespace argen::lumina {

inline constexpr char kChameleonBosToken[] = "<s>";
inline constexpr char kLuminaEndOfTurnToken[] = "<reserved08706>";
inline constexpr char kChameleonBeginImageToken[] = "<racm3:break>";
inline constexpr char kChameleonEndImageToken[] = "<eoss>";
inline constexpr char kLuminaNewLineToken[] = "<reserved08799>";
// Pixels per resolution-token unit (Lumina-mGPT's patch_size).
inline constexpr int32_t kLuminaPatchPixels = 32;

// The content of the resolution token for `units` patches ("<reserved08816>" for 16).
std::string LuminaResolutionToken(int32_t units);

// The human turn without BOS: template, caption (as given) and the end-of-turn token.
std::string LuminaPromptText(std::string_view caption, int32_t width, int32_t height);

struct LuminaTokenIds {
  int32_t bos = -1, end_of_turn = -1, begin_image = -1, end_image = -1, new_line = -1;
};
// Every special token the generation loop needs; FailedPrecondition naming the first missing one.
absl::StatusOr<LuminaTokenIds> FindLuminaTokens(const tokenizer::Tokenizer& tokenizer);

struct LuminaPromptIds {
  std::vector<int32_t> cond;    // <s>, the human turn's ids, <reserved08706>
  std::vector<int32_t> header;  // <racm3:break>, height token, width token: also the unconditional prompt
};

// Errors: empty caption, width or height not a positive multiple of 32, a
// resolution token the tokenizer lacks, invalid UTF-8, or more than
// max_prompt_tokens cond ids (<= 0: no limit).
absl::StatusOr<LuminaPromptIds> BuildLuminaPrompt(const tokenizer::Tokenizer& tokenizer, std::string_view caption,
                                                  int32_t width, int32_t height, int32_t max_prompt_tokens);

}  // namespace argen::lumina
