#include "server/byte_size.h"

#include <cmath>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace argen::server {
namespace {

struct Unit {
  absl::string_view name;
  double factor;
};

constexpr Unit kUnits[] = {
    {"", 1},           {"B", 1},
    {"KiB", 1024.0},   {"MiB", 1024.0 * 1024},   {"GiB", 1024.0 * 1024 * 1024},
    {"TiB", 1024.0 * 1024 * 1024 * 1024},
    {"kB", 1e3},       {"KB", 1e3},              {"MB", 1e6},
    {"GB", 1e9},       {"TB", 1e12},
};

}  // namespace

absl::StatusOr<int64_t> ParseByteSize(absl::string_view text) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  size_t split = 0;
  while (split < s.size() && (absl::ascii_isdigit(s[split]) || s[split] == '.')) ++split;
  absl::string_view number = s.substr(0, split);
  absl::string_view unit = absl::StripLeadingAsciiWhitespace(s.substr(split));
  double value = 0;
  if (number.empty() || !absl::SimpleAtod(number, &value)) {
    return absl::InvalidArgumentError(absl::StrCat("\"", std::string(text),
                                                   "\" is not a byte size (e.g. 8GiB, 512MiB)"));
  }
  for (const Unit& u : kUnits) {
    if (unit != u.name) continue;
    const double bytes = value * u.factor;
    if (bytes > 9.2e18) {
      return absl::InvalidArgumentError(absl::StrCat("\"", std::string(text), "\" is too large"));
    }
    return static_cast<int64_t>(std::llround(bytes));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "\"", std::string(text), "\" has unknown unit \"", std::string(unit),
      "\" (use B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)"));
}

}  // namespace argen::server
