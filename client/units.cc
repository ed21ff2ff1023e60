#include "client/units.h"

#include <cmath>
#include <cstdio>
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"

namespace argen::client {
namespace {

// Splits "64MiB" into (64, "mib"): the number and its lower-case unit.
std::optional<std::pair<double, std::string>> NumberAndUnit(std::string_view text) {
  size_t end = 0;
  while (end < text.size() && (absl::ascii_isdigit(static_cast<unsigned char>(text[end])) || text[end] == '.')) ++end;
  double number = 0;
  if (end == 0 || !absl::SimpleAtod(std::string(text.substr(0, end)), &number) || !std::isfinite(number)) {
    return std::nullopt;
  }
  const std::string unit(text.substr(end));
  return std::pair<double, std::string>{number, absl::AsciiStrToLower(absl::StripAsciiWhitespace(unit))};
}

}  // namespace

std::optional<double> ParseDurationSeconds(std::string_view text) {
  const auto parsed = NumberAndUnit(text);
  if (!parsed) return std::nullopt;
  const auto& [n, unit] = *parsed;
  if (unit.empty() || unit == "s") return n;
  if (unit == "ms") return n / 1000;
  if (unit == "m" || unit == "min") return n * 60;
  if (unit == "h") return n * 3600;
  return std::nullopt;
}

std::optional<int64_t> ParseByteCount(std::string_view text) {
  const auto parsed = NumberAndUnit(text);
  if (!parsed) return std::nullopt;
  const auto& [n, unit] = *parsed;
  double scale = 0;
  if (unit.empty() || unit == "b") scale = 1;
  if (unit == "k" || unit == "kb") scale = 1e3;
  if (unit == "m" || unit == "mb") scale = 1e6;
  if (unit == "g" || unit == "gb") scale = 1e9;
  if (unit == "ki" || unit == "kib") scale = 1024.0;
  if (unit == "mi" || unit == "mib") scale = 1024.0 * 1024;
  if (unit == "gi" || unit == "gib") scale = 1024.0 * 1024 * 1024;
  const double bytes = n * scale;
  if (scale == 0 || bytes != std::floor(bytes) || bytes > 9.0e18) return std::nullopt;
  return static_cast<int64_t>(bytes);
}

CLI::Validator DurationSeconds() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        const std::optional<double> s = ParseDurationSeconds(value);
        if (!s) return "\"" + value.substr(0, 32) + "\" is not a duration (seconds, or 500ms, 90s, 2m, 1h)";
        value = std::to_string(*s);
        return std::string();
      },
      "DURATION");
}

CLI::Validator ByteCount() {
  return CLI::Validator(
      [](std::string& value) -> std::string {
        const std::optional<int64_t> b = ParseByteCount(value);
        if (!b) return "\"" + value.substr(0, 32) + "\" is not a byte count (bytes, or 64MiB, 1GB, 512Ki)";
        value = std::to_string(*b);
        return std::string();
      },
      "BYTES");
}

std::string HumanSeconds(double seconds) {
  char buf[48];
  if (!std::isfinite(seconds)) return "-";
  if (seconds < 1e-3) {
    std::snprintf(buf, sizeof(buf), "%.0f us", seconds * 1e6);
  } else if (seconds < 1) {
    std::snprintf(buf, sizeof(buf), "%.1f ms", seconds * 1e3);
  } else if (seconds < 60) {
    std::snprintf(buf, sizeof(buf), "%.2f s", seconds);
  } else {
    const long long whole = std::llround(seconds);
    std::snprintf(buf, sizeof(buf), "%lld min %lld s", whole / 60, whole % 60);
  }
  return buf;
}

std::string HumanBytes(int64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (std::fabs(value) >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char buf[48];
  if (unit == 0) {
    std::snprintf(buf, sizeof(buf), "%lld B", static_cast<long long>(bytes));
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f %s", value, kUnits[unit]);
  }
  return buf;
}

}  // namespace argen::client
