#include "common/image_size.h"

namespace argen {
namespace {

// 1 to 5 decimal digits -> their value; nullopt otherwise.
std::optional<int32_t> Digits(std::string_view s) {
  if (s.empty() || s.size() > 5) return std::nullopt;
  int32_t v = 0;
  for (const char c : s) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

}  // namespace

std::optional<std::pair<int32_t, int32_t>> ParseImageSize(std::string_view text) {
  const size_t x = text.find('x');
  if (x == std::string_view::npos) return std::nullopt;
  const std::optional<int32_t> w = Digits(text.substr(0, x)), h = Digits(text.substr(x + 1));
  if (!w || !h || *w <= 0 || *h <= 0) return std::nullopt;
  return std::pair{*w, *h};
}

}  // namespace argen
