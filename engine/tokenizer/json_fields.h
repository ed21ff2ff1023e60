// Typed reads of tokenizer.json fields with errors that name the field path.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace argen::tokenizer {

inline absl::Status FieldError(absl::string_view where, absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(where, ".", field, ": ", what));
}

// Optional boolean: absent or null gives `fallback`.
inline absl::StatusOr<bool> OptionalBool(const nlohmann::json& obj, const char* field, bool fallback,
                                         const std::string& where) {
  auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) return FieldError(where, field, "expected a boolean");
  return it->get<bool>();
}

inline absl::StatusOr<std::string> RequiredString(const nlohmann::json& obj, const char* field,
                                                  const std::string& where) {
  auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) return FieldError(where, field, "missing");
  if (!it->is_string()) return FieldError(where, field, "expected a string");
  return it->get<std::string>();
}

// Optional string: absent or null gives "".
inline absl::StatusOr<std::string> OptionalString(const nlohmann::json& obj, const char* field,
                                                  const std::string& where) {
  auto it = obj.find(field);
  if (it == obj.end() || it->is_null()) return std::string();
  if (!it->is_string()) return FieldError(where, field, "expected a string");
  return it->get<std::string>();
}

// The member `field` of `obj`, or null when `obj` is no object or lacks it.
inline const nlohmann::json* Member(const nlohmann::json& obj, const std::string& field) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(field);
  return it == obj.end() ? nullptr : &*it;
}

// A string member or `fallback` when it is absent or not a string (never
// throws, unlike nlohmann's value(), which throws on a type mismatch).
inline std::string StringOr(const nlohmann::json& obj, const char* field, const std::string& fallback) {
  if (!obj.is_object()) return fallback;
  auto it = obj.find(field);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : fallback;
}

}  // namespace argen::tokenizer
