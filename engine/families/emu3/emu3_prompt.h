// The text-to-image prompt as BAAI's image_generation.py builds it with its
// Emu3Processor (mode 'G') and as transformers' Emu3Processor does with
// return_for_image_generation: BOS <|extra_203|>, the caption followed by the
// positive suffix " masterpiece, film grained, best quality.", then the image
// header <|image start|> "{h}*{w}" <|image token|> (h, w: code rows and
// columns). Guidance: the unconditional row is the negative prompt in the
// same frame (BOS, negative text, header; no suffix), with its own KV,
// classifier-free guidance scale 3.0 (UnbatchedClassifierFreeGuidanceLogits-
// Processor: its log-softmax shifts are constant per step, so guidance on raw
// logits samples the same). Special tokens are found by content, never by id;
// caption text is encoded as text (a special token's spelling in it is not
// that token).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tokenizer/tokenizer.h"

namespace argen::emu3 {

inline constexpr char kBosToken[] = "<|extra_203|>";
inline constexpr char kEosToken[] = "<|extra_204|>";
inline constexpr char kPadToken[] = "<|endoftext|>";
inline constexpr char kRowEndToken[] = "<|extra_200|>";
inline constexpr char kEndOfFrameToken[] = "<|extra_201|>";
inline constexpr char kImageToken[] = "<|image token|>";
inline constexpr char kBeginImageToken[] = "<|image start|>";
inline constexpr char kEndImageToken[] = "<|image end|>";
inline constexpr char kPositiveSuffix[] = " masterpiece, film grained, best quality.";
inline constexpr char kDefaultNegativePrompt[] =
    "lowres, bad anatomy, bad hands, text, error, missing fingers, extra digit, fewer digits, cropped, worst "
    "quality, low quality, normal quality, jpeg artifacts, signature, watermark, username, blurry.";
inline constexpr float kDefaultCfgWeight = 3.0f;
inline constexpr int32_t kDefaultImageTopK = 2048;

// "<|visual token 000042|>" for code 42.
std::string VisualTokenName(int32_t code);

struct Emu3TokenIds {
  int32_t bos = -1, eos = -1, pad = -1, row_end = -1, end_of_frame = -1;
  int32_t image = -1, begin_image = -1, end_image = -1;
  int32_t first_visual = -1;  // <|visual token 000000|>; code k is first_visual + k
};
// Every special token and the visual tokens (checked contiguous for
// `codebook_size` codes); FailedPrecondition naming the first missing or
// misplaced one.
absl::StatusOr<Emu3TokenIds> FindEmu3Tokens(const tokenizer::Tokenizer& tokenizer, int32_t codebook_size);

struct Emu3PromptIds {
  std::vector<int32_t> cond;    // BOS, caption + positive suffix, header
  std::vector<int32_t> uncond;  // BOS, negative prompt, header
};

// negative_prompt empty: Emu3's default negative prompt. Errors: empty
// caption, invalid UTF-8, more than max_prompt_tokens cond or uncond ids
// (<= 0: no limit).
absl::StatusOr<Emu3PromptIds> BuildEmu3Prompt(const tokenizer::Tokenizer& tokenizer, const Emu3TokenIds& ids,
                                              std::string_view caption, std::string_view negative_prompt,
                                              int32_t grid_w, int32_t grid_h, int32_t max_prompt_tokens);

}  // namespace argen::emu3
