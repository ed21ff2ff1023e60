// NextStep-1's text-to-image prompt, as NextStepPipeline.generate_image builds
// it (nextstep/models/pipeline_nextstep.py, example.py's text-to-image call):
//   cond:   tokenizer(caption + " " + positive_prompt)        (special tokens on)
//   uncond: tokenizer(negative_prompt)                          (no positive suffix)
// each followed by the prefix tokenizer("<|image_area|>" + "{h}*{w}") without
// its BOS, then boi (h, w: token rows and columns, image pixels / 16). The
// pipeline batches the two rows left-padded with a mask and positions counted
// over the padding; RoPE depends only on position differences, so each row
// alone at positions 0.. attends the same.
//
// The tokenizer is the checkpoint's tokenizer.json (Qwen2 byte-level BPE with
// NextStep's added tokens); the image tokens are found by content and must be
// config.json's boi / eoi / image_placeholder_id.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/families/nextstep/nextstep_config.h"
#include "engine/tokenizer/tokenizer.h"

namespace argen::nextstep {

// tokenization_nextstep.py's added special tokens.
inline constexpr char kImageAreaToken[] = "<|image_area|>";
inline constexpr char kBeginImageToken[] = "<|begin_of_image|>";
inline constexpr char kEndImageToken[] = "<|end_of_image|>";
inline constexpr char kImagePlaceholderToken[] = "<|image_placeholder|>";
// example.py's text-to-image call.
inline constexpr char kPositivePrompt[] = "masterpiece, film grained, best quality.";
inline constexpr char kDefaultNegativePrompt[] =
    "lowres, bad anatomy, bad hands, error, missing fingers, extra digit, fewer digits, cropped, worst quality, low "
    "quality, normal quality, jpeg artifacts, signature, watermark, username, blurry.";

struct NextStepTokenIds {
  int32_t image_area = -1, boi = -1, eoi = -1, image_placeholder = -1;
};

// <model_dir>/tokenizer.json. Its NFC normalizer (Qwen2's) is dropped: text is
// encoded as given, the same ids for text already in NFC. tokenizer_config.json
// is not read (a Qwen2 tokenizer adds no BOS or EOS; the pipeline turns
// add_eos_token off).
absl::StatusOr<std::shared_ptr<const tokenizer::Tokenizer>> LoadNextStepTokenizer(const std::string& model_dir);

// The image tokens by content; FailedPrecondition naming a missing one or one
// whose id is not config.json's.
absl::StatusOr<NextStepTokenIds> FindNextStepTokens(const tokenizer::Tokenizer& tokenizer,
                                                    const NextStepConfig& config);

struct NextStepPromptIds {
  std::vector<int32_t> cond;    // caption + positive suffix, prefix, boi
  std::vector<int32_t> uncond;  // negative prompt, prefix, boi
};

// negative_prompt empty: kDefaultNegativePrompt. Errors: empty caption,
// invalid UTF-8 (naming the field), a non-positive grid.
absl::StatusOr<NextStepPromptIds> BuildNextStepPrompt(const tokenizer::Tokenizer& tokenizer,
                                                      const NextStepTokenIds& ids, std::string_view caption,
                                                      std::string_view negative_prompt, int32_t grid_w, int32_t grid_h);

}  // namespace argen::nextstep
