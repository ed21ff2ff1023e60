#include "client/flags.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace argen::client {

absl::StatusOr<Flags> Flags::Parse(const std::vector<std::string>& args,
                                   const std::set<std::string>& known,
                                   const std::set<std::string>& switches) {
  Flags flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!absl::StartsWith(arg, "--") || arg.size() < 3) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", arg, "'"));
    }
    std::string name = arg.substr(2), value;
    const size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (known.count(name) == 0) {
      return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name, " (known: --",
                                                     absl::StrJoin(known, ", --"), ")"));
    }
    if (switches.count(name) > 0) {
      if (eq != std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat("flag --", name, " takes no value"));
      }
      value = "true";
    } else if (eq == std::string::npos) {
      if (i + 1 >= args.size()) return absl::InvalidArgumentError(absl::StrCat("flag --", name, " needs a value"));
      value = args[++i];
    }
    flags.values_[name] = value;
  }
  return flags;
}

std::string Flags::String(const std::string& name, const std::string& fallback) const {
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

absl::StatusOr<std::optional<int64_t>> Flags::OptionalInt(const std::string& name, int64_t min,
                                                          int64_t max) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::optional<int64_t>();
  int64_t v = 0;
  if (!absl::SimpleAtoi(it->second, &v) || v < min || v > max) {
    return absl::InvalidArgumentError(absl::StrCat("flag --", name, ": \"", it->second,
                                                   "\" is not an integer in [", min, ", ", max, "]"));
  }
  return std::optional<int64_t>(v);
}

absl::StatusOr<int64_t> Flags::Int(const std::string& name, int64_t fallback, int64_t min,
                                   int64_t max) const {
  absl::StatusOr<std::optional<int64_t>> v = OptionalInt(name, min, max);
  if (!v.ok()) return v.status();
  return v->value_or(fallback);
}

absl::StatusOr<std::optional<double>> Flags::OptionalDouble(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::optional<double>();
  double v = 0;
  if (!absl::SimpleAtod(it->second, &v)) {
    return absl::InvalidArgumentError(absl::StrCat("flag --", name, ": \"", it->second, "\" is not a number"));
  }
  return std::optional<double>(v);
}

absl::StatusOr<double> Flags::Double(const std::string& name, double fallback) const {
  absl::StatusOr<std::optional<double>> v = OptionalDouble(name);
  if (!v.ok()) return v.status();
  return v->value_or(fallback);
}

}  // namespace argen::client
