// Reading a family's JSON config files: the file's text, its top-level object,
// and typed reads of an object's fields whose errors name the file and key.
// Shared by the families whose configs read the same way (Emu3, NextStep-1).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace argen::families {

// The whole file; NOT_FOUND "<path>: cannot open".
absl::StatusOr<std::string> ReadTextFile(const std::string& path);

// `text` parsed as a JSON object; INVALID_ARGUMENT naming `file` otherwise.
absl::StatusOr<nlohmann::json> ParseJsonObject(const std::string& text, const std::string& file);

// Typed reads of one object's fields. An absent or null field leaves *out as it
// is (or is an error when `required`); a field of the wrong type is an error
// "<where>: field '<key>' must be ...".
class JsonFields {
 public:
  JsonFields(const nlohmann::json& object, std::string where) : o_(object), where_(std::move(where)) {}

  absl::Status Int(const char* key, int32_t* out, bool required) const;
  absl::Status Real(const char* key, double* out) const;
  absl::Status Bool(const char* key, bool* out) const;
  absl::Status String(const char* key, std::string* out) const;
  // A non-empty list of positive integers.
  absl::Status IntList(const char* key, std::vector<int32_t>* out) const;
  // A key that must be absent, null or `expected` (`why` says what it would switch on).
  absl::Status Is(const char* key, const nlohmann::json& expected, const char* why) const;

 private:
  const nlohmann::json& o_;
  std::string where_;
};

}  // namespace argen::families
