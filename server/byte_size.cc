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

constexpr double kKi = 1024.0;
constexpr Unit kUnits[] = {
    {"", 1},
    {"B", 1},
    {"Ki", kKi},
    {"Mi", kKi* kKi},
    {"Gi", kKi* kKi* kKi},
    {"Ti", kKi* kKi* kKi* kKi},
    {"Pi", kKi* kKi* kKi* kKi* kKi},
    {"KiB", kKi},
    {"MiB", kKi* kKi},
    {"GiB", kKi* kKi* kKi},
    {"TiB", kKi* kKi* kKi* kKi},
    {"PiB", kKi* kKi* kKi* kKi* kKi},
    {"k", 1e3},
    {"K", 1e3},
    {"M", 1e6},
    {"G", 1e9},
    {"T", 1e12},
    {"P", 1e15},
    {"kB", 1e3},
    {"KB", 1e3},
    {"MB", 1e6},
    {"GB", 1e9},
    {"TB", 1e12},
    {"PB", 1e15},
};

constexpr char kUnitList[] = "B, Ki/KiB, Mi/MiB, Gi/GiB, Ti/TiB, Pi/PiB, k/K/kB/KB, M/MB, G/GB, T/TB, P/PB";

}  // namespace

absl::StatusOr<int64_t> ParseByteSize(absl::string_view text) {
  absl::string_view s = absl::StripAsciiWhitespace(text);
  size_t split = 0;
  while (split < s.size() && (absl::ascii_isdigit(s[split]) || s[split] == '.')) ++split;
  absl::string_view number = s.substr(0, split);
  absl::string_view unit = absl::StripLeadingAsciiWhitespace(s.substr(split));
  double value = 0;
  if (number.empty() || !absl::SimpleAtod(number, &value)) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", std::string(text), "\" is not a byte size (e.g. 8GiB, 40Gi, 4G, 512MiB)"));
  }
  for (const Unit& u : kUnits) {
    if (unit != u.name) continue;
    const double bytes = value * u.factor;
    if (bytes > 9.2e18) {
      return absl::InvalidArgumentError(absl::StrCat("\"", std::string(text), "\" is too large"));
    }
    return static_cast<int64_t>(std::llround(bytes));
  }
  if (!unit.empty() && unit[0] == 'm') {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", std::string(text),
                     "\": lowercase m is milli (as in Kubernetes); write M or MB (10^6) or Mi or MiB (2^20)"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("\"", std::string(text), "\" has unknown unit \"", std::string(unit), "\" (use ", kUnitList, ")"));
}

}  // namespace argen::server
