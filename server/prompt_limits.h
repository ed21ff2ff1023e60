// Cheap checks of a prompt's raw bytes that run before anything costly
// (tokenizing is ~0.4 us per byte: a 60 MiB prompt took 28 s and 2.25 GiB).
//
// The byte bound derives from the model's max_prompt_tokens: a prompt longer
// than max_prompt_tokens x kPromptBytesPerToken bytes is refused outright.
// English averages ~4 bytes per token; the longest tokens of byte-level BPE
// vocabularies are runs of spaces or punctuation, so 32 bytes per token
// leaves room for every prompt that could fit while bounding the work a
// request can cause to a small multiple of its size. The config key
// max_prompt_bytes overrides it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "absl/status/status.h"

namespace argen::server {

inline constexpr int64_t kPromptBytesPerToken = 32;

// The byte bound in force: `configured` when > 0, else max_prompt_tokens x
// kPromptBytesPerToken (when the model reports no token limit, `fallback`).
int64_t PromptByteLimit(int64_t configured, int32_t max_prompt_tokens, int64_t fallback);

// The offset of the first byte that is not part of well-formed UTF-8 (no
// overlong forms, surrogates or code points past U+10FFFF, as protobuf
// checks), or npos when `text` is valid.
size_t FirstInvalidUtf8(std::string_view text);

// INVALID_ARGUMENT naming `field` (prompt, negative_prompt) when it is longer
// than `max_bytes` bytes or not valid UTF-8; OK otherwise. Linear in its size.
absl::Status CheckPromptBytes(std::string_view prompt, int64_t max_bytes, std::string_view field = "prompt");

}  // namespace argen::server
