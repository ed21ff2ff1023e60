// GPT-2's reversible byte <-> printable code point mapping used by byte-level
// BPE: every byte becomes a visible character so vocabularies are plain strings.
#pragma once

#include <cstdint>
#include <string>

namespace argen::tokenizer {

char32_t ByteToChar(uint8_t byte);
// The byte a mapped character stands for, or -1 for a character outside the mapping.
int CharToByte(char32_t c);

// GPT-2's split pattern, used by the ByteLevel pre-tokenizer when use_regex is true.
inline constexpr const char* kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace argen::tokenizer
