// Reading a family's JSON config files: the file's text, its top-level object,
// and typed reads of an object's fields whose errors name the file and key.
// Shared by the families' config readers (Emu3, NextStep-1, Janus, LlamaGen).
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
// "<where>: field '<path>' must be ...", where <path> is the key, dotted after
// the object's own path for a nested object read through Object().
class JsonFields {
 public:
  JsonFields(const nlohmann::json& object, std::string where, std::string prefix = "")
      : o_(object), where_(std::move(where)), prefix_(std::move(prefix)) {}

  // The field's value, or nullptr when it is absent or null.
  const nlohmann::json* Get(const char* key) const;
  // INVALID_ARGUMENT "<where>: field '<path>' <what>".
  absl::Status Error(const char* key, const std::string& what) const;
  // A required nested object, read with the dotted path "<path>.<its key>".
  absl::StatusOr<JsonFields> Object(const char* key) const;

  absl::Status Int(const char* key, int32_t* out, bool required) const;
  absl::Status Real(const char* key, double* out) const;
  absl::Status Bool(const char* key, bool* out) const;
  absl::Status String(const char* key, std::string* out) const;
  // A non-empty list of positive integers.
  absl::Status IntList(const char* key, std::vector<int32_t>* out) const;
  // A key that must be absent, null or `expected` (`why` says what it would switch on).
  absl::Status Is(const char* key, const nlohmann::json& expected, const char* why) const;

  // The reads below phrase absence as "field '<path>' is missing" (Janus' and
  // LlamaGen's wording, which their tests and users rely on).
  // An integer in [1, INT32_MAX].
  absl::Status PositiveInt(const char* key, int32_t* out, bool required) const;
  // An integer in [min_value, INT32_MAX] (PositiveInt is min_value 1).
  absl::Status IntAtLeast(const char* key, int32_t min_value, int32_t* out, bool required) const;
  // A number > 0.
  absl::Status Positive(const char* key, double* out) const;
  // A required string that must be `want` (a class name we implement).
  absl::Status Expect(const char* key, const std::string& want, std::string* out) const;
  // A non-empty list of integers in [1, 1024]; otherwise the error says `must_be`.
  absl::Status SmallIntList(const char* key, const char* must_be, std::vector<int32_t>* out) const;

 private:
  std::string Path(const char* key) const;

  const nlohmann::json& o_;
  std::string where_;
  std::string prefix_;
};

}  // namespace argen::families
