#include "engine/tokenizer/utf8.h"

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace argen::tokenizer {
namespace {

// Length of the valid UTF-8 sequence at s[i], writing its code point; or 0 and
// *bad_len = length of the maximal invalid subpart (at least 1).
size_t NextCodePoint(std::string_view s, size_t i, char32_t* cp, size_t* bad_len) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t b0 = b(i);
  *bad_len = 1;
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  }
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;
  char32_t value;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1, value = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2, value = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;  // no surrogates
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3, value = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t k = 1; k <= need; ++k) {
    if (i + k >= s.size()) return 0;
    const uint8_t c = b(i + k);
    if (c < lo || c > hi) return 0;
    lo = 0x80, hi = 0xBF;
    value = (value << 6) | (c & 0x3F);
    *bad_len = k + 1;
  }
  *cp = value;
  return need + 1;
}

}  // namespace

absl::StatusOr<std::u32string> DecodeUtf8(std::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    char32_t cp;
    size_t bad;
    const size_t n = NextCodePoint(text, i, &cp, &bad);
    if (n == 0) return absl::InvalidArgumentError(absl::StrCat("text is not valid UTF-8 at byte ", i));
    out.push_back(cp);
    i += n;
  }
  return out;
}

void AppendUtf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string EncodeUtf8(std::u32string_view cps) {
  std::string out;
  out.reserve(cps.size());
  for (char32_t cp : cps) AppendUtf8(cp, out);
  return out;
}

std::string Utf8Lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  size_t i = 0;
  while (i < bytes.size()) {
    char32_t cp;
    size_t bad;
    const size_t n = NextCodePoint(bytes, i, &cp, &bad);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      i += bad;
    } else {
      out.append(bytes.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace argen::tokenizer
