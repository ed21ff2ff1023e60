// Emu3's text tokenizer in either layout, as one tokenizer::Tokenizer:
//   * BAAI (emu3.tiktoken + emu3_vision_tokens.txt, BAAI's tiktoken-based
//     Emu3Tokenizer): the ranks become a byte-level BPE (a token's merge is
//     the split of its bytes that BPE reaches below its own rank, the way
//     transformers' Emu3 conversion derives merges), the pre-tokenizer is
//     tiktoken's split with Qwen's pattern, and the special tokens follow the
//     ranks in BAAI's order: <|endoftext|>, <|im_start|>, <|im_end|>,
//     <|extra_0|>..<|extra_204|>, then the vision tokens file's lines
//     (151643.. with the published 151643 ranks).
//   * transformers (tokenizer.json, Emu3-Gen-hf): read as it is.
// BAAI's tokenizer NFC-normalises text first; argen encodes text as given
// (identical for ASCII and for text already in NFC).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "engine/families/emu3/emu3_config.h"
#include "engine/tokenizer/tokenizer.h"

namespace argen::emu3 {

inline constexpr char kTiktokenFile[] = "emu3.tiktoken";
inline constexpr char kVisionTokensFile[] = "emu3_vision_tokens.txt";
// tiktoken's pat_str in BAAI's tokenization_emu3.py (Qwen's).
inline constexpr char kQwenSplitPattern[] =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

// The tokenizer.json equivalent of BAAI's files (text), for LoadFromJson.
// Errors name the file and line: bad base64, ranks that are not 0..n-1, a
// token that no two earlier tokens make.
absl::StatusOr<std::string> TiktokenToTokenizerJson(const std::string& tiktoken_path,
                                                    const std::string& vision_tokens_path);

// The layout's tokenizer from model_dir.
absl::StatusOr<std::shared_ptr<const tokenizer::Tokenizer>> LoadEmu3Tokenizer(const std::string& model_dir,
                                                                              Emu3Layout layout);

}  // namespace argen::emu3
