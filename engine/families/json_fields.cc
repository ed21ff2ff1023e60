#include "engine/families/json_fields.h"

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace argen::families {

using nlohmann::json;

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

absl::StatusOr<json> ParseJsonObject(const std::string& text, const std::string& file) {
  json root = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(file, ": malformed JSON"));
  if (!root.is_object()) return absl::InvalidArgumentError(absl::StrCat(file, ": top level is not a JSON object"));
  return root;
}

absl::Status JsonFields::Int(const char* key, int32_t* out, bool required) const {
  auto it = o_.find(key);
  if (it == o_.end() || it->is_null()) {
    return required ? absl::InvalidArgumentError(absl::StrCat(where_, ": missing field '", key, "'"))
                    : absl::OkStatus();
  }
  if (!it->is_number_integer()) {
    return absl::InvalidArgumentError(absl::StrCat(where_, ": field '", key, "' must be an integer"));
  }
  *out = it->get<int32_t>();
  return absl::OkStatus();
}

absl::Status JsonFields::Real(const char* key, double* out) const {
  auto it = o_.find(key);
  if (it == o_.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number()) {
    return absl::InvalidArgumentError(absl::StrCat(where_, ": field '", key, "' must be a number"));
  }
  *out = it->get<double>();
  return absl::OkStatus();
}

absl::Status JsonFields::Bool(const char* key, bool* out) const {
  auto it = o_.find(key);
  if (it == o_.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_boolean()) {
    return absl::InvalidArgumentError(absl::StrCat(where_, ": field '", key, "' must be true or false"));
  }
  *out = it->get<bool>();
  return absl::OkStatus();
}

absl::Status JsonFields::String(const char* key, std::string* out) const {
  auto it = o_.find(key);
  if (it == o_.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(where_, ": field '", key, "' must be a string"));
  }
  *out = it->get<std::string>();
  return absl::OkStatus();
}

absl::Status JsonFields::IntList(const char* key, std::vector<int32_t>* out) const {
  auto it = o_.find(key);
  if (it == o_.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_array() || it->empty()) {
    return absl::InvalidArgumentError(absl::StrCat(where_, ": field '", key, "' must be a non-empty integer list"));
  }
  out->clear();
  for (const json& v : *it) {
    if (!v.is_number_integer() || v.get<int64_t>() <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(where_, ": field '", key, "' must list positive integers"));
    }
    out->push_back(v.get<int32_t>());
  }
  return absl::OkStatus();
}

absl::Status JsonFields::Is(const char* key, const json& expected, const char* why) const {
  auto it = o_.find(key);
  if (it == o_.end() || it->is_null() || *it == expected) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(where_, ": field '", key, "' is ", it->dump(), "; ", why));
}

}  // namespace argen::families
