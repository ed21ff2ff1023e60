// A small --key=value / --key value parser for argen_client subcommands.
// Each subcommand declares its flags; anything else is an error naming it.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace argen::client {

class Flags {
 public:
  // `known`: flag names (without --); `switches`: those that take no value.
  static absl::StatusOr<Flags> Parse(const std::vector<std::string>& args,
                                     const std::set<std::string>& known,
                                     const std::set<std::string>& switches = {});

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::string String(const std::string& name, const std::string& fallback = "") const;
  absl::StatusOr<int64_t> Int(const std::string& name, int64_t fallback, int64_t min, int64_t max) const;
  absl::StatusOr<double> Double(const std::string& name, double fallback) const;
  absl::StatusOr<std::optional<int64_t>> OptionalInt(const std::string& name, int64_t min, int64_t max) const;
  absl::StatusOr<std::optional<double>> OptionalDouble(const std::string& name) const;

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace argen::client
