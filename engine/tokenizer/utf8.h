// UTF-8 <-> code points. Decoding is strict (the tokenizer rejects invalid
// UTF-8 input); DecodeLossy mirrors Rust's String::from_utf8_lossy for Decode().
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace argen::tokenizer {

// Code points of valid UTF-8; error names the byte offset of the first bad sequence.
absl::StatusOr<std::u32string> DecodeUtf8(std::string_view text);
void AppendUtf8(char32_t cp, std::string& out);
std::string EncodeUtf8(std::u32string_view cps);
// Invalid sequences become U+FFFD, one per maximal invalid subpart (WHATWG / Rust rule).
std::string Utf8Lossy(std::string_view bytes);

}  // namespace argen::tokenizer
