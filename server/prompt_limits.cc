#include "server/prompt_limits.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace argen::server {

int64_t PromptByteLimit(int64_t configured, int32_t max_prompt_tokens, int64_t fallback) {
  if (configured > 0) return configured;
  if (max_prompt_tokens > 0) return int64_t{max_prompt_tokens} * kPromptBytesPerToken;
  return fallback;
}

size_t FirstInvalidUtf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    uint32_t cp = 0;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
    } else {
      return i;  // a continuation byte, 0xC0/0xC1 (overlong) or > 0xF4
    }
    if (n - i < len) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      cp = (cp << 6) | (s[i + k] & 0x3F);
    }
    if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

absl::Status CheckPromptBytes(std::string_view prompt, int64_t max_bytes, std::string_view field) {
  if (static_cast<int64_t>(prompt.size()) > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        std::string(field), ": ", prompt.size(), " bytes, over the limit of ", max_bytes, " bytes (max_prompt_bytes)"));
  }
  if (const size_t bad = FirstInvalidUtf8(prompt); bad != std::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(field), ": not valid UTF-8 (byte ", bad, ")"));
  }
  return absl::OkStatus();
}

}  // namespace argen::server
