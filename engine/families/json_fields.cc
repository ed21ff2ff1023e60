#include "engine/families/json_fields.h"

#include <fstream>
#include <limits>
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

std::string JsonFields::Path(const char* key) const { return prefix_.empty() ? key : absl::StrCat(prefix_, ".", key); }

const json* JsonFields::Get(const char* key) const {
  auto it = o_.find(key);
  return it == o_.end() || it->is_null() ? nullptr : &*it;
}

absl::Status JsonFields::Error(const char* key, const std::string& what) const {
  return absl::InvalidArgumentError(absl::StrCat(where_, ": field '", Path(key), "' ", what));
}

absl::StatusOr<JsonFields> JsonFields::Object(const char* key) const {
  const json* v = Get(key);
  if (v == nullptr) return Error(key, "is missing");
  if (!v->is_object()) return Error(key, "must be an object");
  return JsonFields(*v, where_, Path(key));
}

absl::Status JsonFields::Int(const char* key, int32_t* out, bool required) const {
  auto it = o_.find(key);
  if (it == o_.end() || it->is_null()) {
    return required ? absl::InvalidArgumentError(absl::StrCat(where_, ": missing field '", Path(key), "'"))
                    : absl::OkStatus();
  }
  if (!it->is_number_integer()) {
    return Error(key, "must be an integer");
  }
  *out = it->get<int32_t>();
  return absl::OkStatus();
}

absl::Status JsonFields::Real(const char* key, double* out) const {
  auto it = o_.find(key);
  if (it == o_.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number()) {
    return Error(key, "must be a number");
  }
  *out = it->get<double>();
  return absl::OkStatus();
}

absl::Status JsonFields::Bool(const char* key, bool* out) const {
  auto it = o_.find(key);
  if (it == o_.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_boolean()) {
    return Error(key, "must be true or false");
  }
  *out = it->get<bool>();
  return absl::OkStatus();
}

absl::Status JsonFields::String(const char* key, std::string* out) const {
  auto it = o_.find(key);
  if (it == o_.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string()) {
    return Error(key, "must be a string");
  }
  *out = it->get<std::string>();
  return absl::OkStatus();
}

absl::Status JsonFields::IntList(const char* key, std::vector<int32_t>* out) const {
  auto it = o_.find(key);
  if (it == o_.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_array() || it->empty()) {
    return Error(key, "must be a non-empty integer list");
  }
  out->clear();
  for (const json& v : *it) {
    if (!v.is_number_integer() || v.get<int64_t>() <= 0) {
      return Error(key, "must list positive integers");
    }
    out->push_back(v.get<int32_t>());
  }
  return absl::OkStatus();
}

absl::Status JsonFields::Is(const char* key, const json& expected, const char* why) const {
  auto it = o_.find(key);
  if (it == o_.end() || it->is_null() || *it == expected) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(where_, ": field '", Path(key), "' is ", it->dump(), "; ", why));
}

absl::Status JsonFields::PositiveInt(const char* key, int32_t* out, bool required) const {
  return IntAtLeast(key, 1, out, required);
}

absl::Status JsonFields::IntAtLeast(const char* key, int32_t min_value, int32_t* out, bool required) const {
  const json* v = Get(key);
  if (v == nullptr) return required ? Error(key, "is missing") : absl::OkStatus();
  if (!v->is_number_integer()) return Error(key, "must be an integer");
  const int64_t x = v->get<int64_t>();
  if (x < min_value || x > std::numeric_limits<int32_t>::max())
    return Error(key, absl::StrCat("is ", x, ", must be at least ", min_value));
  *out = static_cast<int32_t>(x);
  return absl::OkStatus();
}

absl::Status JsonFields::Positive(const char* key, double* out) const {
  const json* v = Get(key);
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_number()) return Error(key, "must be a number");
  const double x = v->get<double>();
  if (!(x > 0)) return Error(key, absl::StrCat("is ", x, ", must be positive"));
  *out = x;
  return absl::OkStatus();
}

absl::Status JsonFields::Expect(const char* key, const std::string& want, std::string* out) const {
  const json* v = Get(key);
  if (v == nullptr) return Error(key, "is missing");
  if (!v->is_string()) return Error(key, "must be a string");
  *out = v->get<std::string>();
  if (*out != want) return Error(key, absl::StrCat("is '", *out, "', only '", want, "' is supported"));
  return absl::OkStatus();
}

absl::Status JsonFields::SmallIntList(const char* key, const char* must_be, std::vector<int32_t>* out) const {
  const json* v = Get(key);
  if (v == nullptr) return absl::OkStatus();
  if (!v->is_array() || v->empty()) return Error(key, must_be);
  std::vector<int32_t> list;
  for (const json& e : *v) {
    if (!e.is_number_integer() || e.get<int64_t>() < 1 || e.get<int64_t>() > 1024) return Error(key, must_be);
    list.push_back(static_cast<int32_t>(e.get<int64_t>()));
  }
  *out = std::move(list);
  return absl::OkStatus();
}

}  // namespace argen::families
