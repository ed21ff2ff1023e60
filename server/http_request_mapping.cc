#include "server/http_request_mapping.h"

#include <algorithm>
#include <limits>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/image_size.h"
#include "nlohmann/json.hpp"

namespace argen::server {
namespace {

using nlohmann::json;

HttpApiError Bad(absl::string_view param, absl::string_view why, std::string code = "invalid_value") {
  HttpApiError e;
  e.status = 400;
  e.param = std::string(param);
  e.message = absl::StrCat(param, ": ", why);
  e.code = std::move(code);
  return e;
}

// Deepest [ / { nesting outside strings (so nlohmann never recurses deeply).
int JsonDepth(absl::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
    else if (c == '[' || c == '{')
      deepest = std::max(deepest, ++depth);
    else if (c == ']' || c == '}')
      --depth;
  }
  return deepest;
}

std::string TypeName(const json& v) {
  switch (v.type()) {
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a number";
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    default:
      return "null";
  }
}

// Typed readers: the value, or the error naming `param`.
std::variant<std::string, HttpApiError> String(const json& v, absl::string_view param) {
  if (!v.is_string()) return Bad(param, absl::StrCat("must be a string, got ", TypeName(v)));
  return v.get<std::string>();
}

std::variant<int32_t, HttpApiError> Int32(const json& v, absl::string_view param) {
  if (v.is_number_unsigned()) {
    const uint64_t x = v.get<uint64_t>();
    if (x > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
      return Bad(param, absl::StrCat("must be an integer in the 32-bit range, got ", x));
    }
    return static_cast<int32_t>(x);
  }
  if (v.is_number_integer()) {
    const int64_t x = v.get<int64_t>();
    if (x < std::numeric_limits<int32_t>::min() || x > std::numeric_limits<int32_t>::max()) {
      return Bad(param, absl::StrCat("must be an integer in the 32-bit range, got ", x));
    }
    return static_cast<int32_t>(x);
  }
  return Bad(param, absl::StrCat("must be an integer, got ", TypeName(v)));
}

std::variant<double, HttpApiError> Number(const json& v, absl::string_view param) {
  if (!v.is_number()) return Bad(param, absl::StrCat("must be a number, got ", TypeName(v)));
  return v.get<double>();
}

// One of `allowed`; the error lists them.
std::variant<std::string, HttpApiError> OneOf(const json& v, absl::string_view param,
                                              const std::vector<std::string>& allowed) {
  auto s = String(v, param);
  if (auto* e = std::get_if<HttpApiError>(&s)) return *e;
  const std::string& value = std::get<std::string>(s);
  for (const std::string& a : allowed) {
    if (value == a) return value;
  }
  return Bad(param, absl::StrCat("'", value, "' is not one of ", absl::StrJoin(allowed, ", ")));
}

#define ARGEN_TAKE(var, expr)                                    \
  auto var##_or = (expr);                                        \
  if (auto* e = std::get_if<HttpApiError>(&var##_or)) return *e; \
  auto var = std::get<0>(std::move(var##_or))

std::optional<HttpApiError> ParsePolicy(const json& v, v1::SparsityPolicy* policy) {
  if (v.is_string()) {
    policy->set_name(v.get<std::string>());
    return std::nullopt;
  }
  if (!v.is_object()) {
    return Bad("policy", absl::StrCat("must be a policy name or an object {name, sparsity, n_att, n_recent, "
                                      "n_sink, kv_cache_dtype}, got ",
                                      TypeName(v)));
  }
  for (const auto& [key, value] : v.items()) {
    const std::string param = absl::StrCat("policy.", key);
    if (value.is_null()) continue;
    if (key == "name") {
      auto s = String(value, param);
      if (auto* e = std::get_if<HttpApiError>(&s)) return *e;
      policy->set_name(std::get<std::string>(s));
    } else if (key == "kv_cache_dtype") {  // its value is checked with the gRPC path's (policy.kv_cache_dtype)
      auto s = String(value, param);
      if (auto* e = std::get_if<HttpApiError>(&s)) return *e;
      policy->set_kv_cache_dtype(std::get<std::string>(s));
    } else if (key == "sparsity") {
      auto x = Number(value, param);
      if (auto* e = std::get_if<HttpApiError>(&x)) return *e;
      policy->set_sparsity(std::get<double>(x));
    } else if (key == "n_att" || key == "n_recent" || key == "n_sink") {
      auto x = Int32(value, param);
      if (auto* e = std::get_if<HttpApiError>(&x)) return *e;
      const int32_t n = std::get<int32_t>(x);
      if (key == "n_att") policy->set_n_att(n);
      if (key == "n_recent") policy->set_n_recent(n);
      if (key == "n_sink") policy->set_n_sink(n);
    } else {
      return Bad(param, "unknown policy parameter (name, sparsity, n_att, n_recent, n_sink, kv_cache_dtype)",
                 "unknown_parameter");
    }
  }
  return std::nullopt;
}

// At most 20 sizes, then how many there are.
std::string SizeList(const std::vector<std::string>& sizes) {
  constexpr size_t kShown = 20;
  std::string out = absl::StrJoin(sizes.begin(), sizes.begin() + std::min(sizes.size(), kShown), ", ");
  if (sizes.size() > kShown) absl::StrAppend(&out, ", ... (", sizes.size(), " sizes; GET /v1/models lists all)");
  return out;
}

// 'model' or 'model' (also 'alias', ...).
std::string ServedNames(const ImagesApiModel& model) {
  std::string out = absl::StrCat("'", model.model, "'");
  if (!model.aliases.empty()) absl::StrAppend(&out, " (also '", absl::StrJoin(model.aliases, "', '"), "')");
  return out;
}

std::variant<ImagesRequest, HttpApiError> Parse(const json& body, const ImagesApiModel& model) {
  ImagesRequest out;
  v1::GenerateRequest& g = out.generate;
  const std::string model_size =
      model.default_size.empty() ? absl::StrCat(model.image_size, "x", model.image_size) : model.default_size;
  out.size = model_size;
  bool have_prompt = false;
  for (const auto& [key, value] : body.items()) {
    if (value.is_null()) continue;  // JSON null: as if absent
    if (key == "prompt") {
      ARGEN_TAKE(prompt, String(value, key));
      g.set_prompt(prompt);
      have_prompt = true;
    } else if (key == "negative_prompt") {  // the guidance row's prompt, as on gRPC
      ARGEN_TAKE(negative, String(value, key));
      g.set_negative_prompt(negative);
    } else if (key == "n" || key == "num_images") {  // OpenAI's name, and gRPC's as an alias
      ARGEN_TAKE(n, Int32(value, key));
      if (n < 1) return Bad(key, absl::StrCat("must be >= 1, got ", n));
      g.set_num_images(n);
    } else if (key == "size") {
      ARGEN_TAKE(size, String(value, key));
      if (size == "auto") continue;
      const std::vector<std::string> sizes = model.sizes.empty() ? std::vector<std::string>{model_size} : model.sizes;
      const std::optional<std::pair<int32_t, int32_t>> wh = ParseImageSize(size);
      if (!wh) {
        return Bad(key, absl::StrCat("'", size.substr(0, 32), "' is not WxH (e.g. ", model_size, ") or auto"));
      }
      const auto [w, h] = *wh;
      if (std::find(sizes.begin(), sizes.end(), size) == sizes.end()) {
        return Bad(key,
                   absl::StrCat("'", size, "' is not available for this model (sizes: ", SizeList(sizes), ", auto)"));
      }
      out.size = size;
      g.set_width(w);
      g.set_height(h);
    } else if (key == "response_format") {
      ARGEN_TAKE(format, String(value, key));
      if (format == "url") {
        return Bad(key, "'url' is not supported: argen keeps no image store; use 'b64_json'", "unsupported_value");
      }
      if (format != "b64_json") return Bad(key, absl::StrCat("'", format, "' is not one of b64_json"));
    } else if (key == "output_format") {
      std::vector<std::string> formats = {"png"};
      if (model.jpeg) formats.push_back("jpeg");
      ARGEN_TAKE(format, OneOf(value, key, formats));
      out.output_format = format;
    } else if (key == "output_compression") {
      ARGEN_TAKE(q, Int32(value, key));
      if (q < 0 || q > 100) return Bad(key, absl::StrCat("must be in [0, 100], got ", q));
      out.output_compression = q;
    } else if (key == "quality") {  // accepted for compatibility; no effect
      ARGEN_TAKE(q, OneOf(value, key, {"auto", "low", "medium", "high", "standard", "hd"}));
    } else if (key == "background") {
      ARGEN_TAKE(b, String(value, key));
      if (b == "transparent")
        return Bad(key, "'transparent' is not supported: argen images are opaque", "unsupported_value");
      if (b != "auto" && b != "opaque") return Bad(key, absl::StrCat("'", b, "' is not one of auto, opaque"));
    } else if (key == "moderation") {  // argen does no moderation
      ARGEN_TAKE(m, OneOf(value, key, {"auto", "low"}));
    } else if (key == "style") {
      ARGEN_TAKE(st, OneOf(value, key, {"vivid", "natural"}));
    } else if (key == "user" || key == "safety_identifier") {  // OpenAI's end-user ids: only checked
      ARGEN_TAKE(user, String(value, key));
      if (user.size() > kMaxUserBytes) return Bad(key, absl::StrCat("must be at most ", kMaxUserBytes, " bytes"));
      if (key == "user") out.user = user;
    } else if (key == "request_id") {  // as gRPC's GenerateRequest.request_id (checked there)
      ARGEN_TAKE(id, String(value, key));
      g.set_request_id(id);
    } else if (key == "stream") {
      if (!value.is_boolean()) return Bad(key, absl::StrCat("must be a boolean, got ", TypeName(value)));
      out.stream = value.get<bool>();
    } else if (key == "partial_images") {
      ARGEN_TAKE(k, Int32(value, key));
      if (k < 0 || k > 3) return Bad(key, absl::StrCat("must be in [0, 3], got ", k));
      out.partial_images = k;
    } else if (key == "model") {
      ARGEN_TAKE(m, String(value, key));
      if (m != model.model && std::find(model.aliases.begin(), model.aliases.end(), m) == model.aliases.end()) {
        HttpApiError e = Bad(key, absl::StrCat("'", m, "' is not served here; this server serves ", ServedNames(model)),
                             "model_not_found");
        e.status = 404;
        return e;
      }
    } else if (key == "seed") {
      if (!value.is_number_unsigned()) {
        return Bad(key, absl::StrCat("must be an integer >= 0, got ",
                                     value.is_number_integer() ? "a negative integer" : TypeName(value)));
      }
      g.set_seed(value.get<uint64_t>());
    } else if (key == "guidance_scale" || key == "cfg_weight") {  // gRPC's name as an alias
      ARGEN_TAKE(w, Number(value, key));
      g.set_cfg_weight(static_cast<float>(w));
    } else if (key == "temperature") {
      ARGEN_TAKE(t, Number(value, key));
      g.set_temperature(static_cast<float>(t));
    } else if (key == "top_k") {
      ARGEN_TAKE(k, Int32(value, key));
      g.set_top_k(k);
    } else if (key == "top_p") {
      ARGEN_TAKE(p, Number(value, key));
      g.set_top_p(static_cast<float>(p));
    } else if (key == "policy") {
      if (std::optional<HttpApiError> e = ParsePolicy(value, g.mutable_policy())) return *e;
    } else if (key == "class_id") {  // class-conditional models (argen extension)
      ARGEN_TAKE(c, Int32(value, key));
      g.set_class_id(c);
    } else if (key == "parallel_window") {  // argen extension; its range is checked with the gRPC path's
      ARGEN_TAKE(w, Int32(value, key));
      g.set_parallel_window(w);
    } else if (key == "speculative_window") {  // argen extension; its range is checked with the gRPC path's
      ARGEN_TAKE(w, Int32(value, key));
      g.set_speculative_window(w);
    } else if (key == "priority") {
      ARGEN_TAKE(p, OneOf(value, key, {"low", "normal", "high"}));
      g.set_priority(p == "low" ? v1::PRIORITY_LOW : p == "high" ? v1::PRIORITY_HIGH : v1::PRIORITY_NORMAL);
    } else if (model.strict_fields) {
      return Bad(key, "unknown parameter (the server's http.strict_fields is on)", "unknown_parameter");
    } else {
      out.ignored_fields.push_back(key);
    }
  }
  // A class-conditional model takes class_id instead (the engine judges which the model needs).
  if (!have_prompt && !g.has_class_id()) return Bad("prompt", "required", "missing_required_parameter");
  if (out.stream) g.set_previews(out.partial_images);
  return out;
}

#undef ARGEN_TAKE

}  // namespace

std::variant<ImagesRequest, HttpApiError> ParseImagesRequest(absl::string_view body, const ImagesApiModel& model) {
  if (absl::StripAsciiWhitespace(body).empty()) {
    HttpApiError e;
    e.message = "request body is empty: want a JSON object with at least \"prompt\"";
    e.code = "invalid_json";
    return e;
  }
  if (JsonDepth(body) > kMaxJsonDepth) {
    HttpApiError e;
    e.message = absl::StrCat("request body nests deeper than ", kMaxJsonDepth, " levels");
    e.code = "invalid_json";
    return e;
  }
  const json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) {
    HttpApiError e;
    e.message = "request body is not valid JSON";
    e.code = "invalid_json";
    return e;
  }
  if (!parsed.is_object()) {
    HttpApiError e;
    e.message = absl::StrCat("request body must be a JSON object, got ", TypeName(parsed));
    e.code = "invalid_json";
    return e;
  }
  return Parse(parsed, model);
}

std::string JsonFieldOf(absl::string_view proto_field) {
  if (proto_field == "num_images") return "n";
  if (proto_field == "cfg_weight" || proto_field == "sampling.cfg_weight") return "guidance_scale";
  if (proto_field == "previews") return "partial_images";
  if (proto_field == "width" || proto_field == "height") return "size";
  if (absl::StartsWith(proto_field, "sampling.")) return std::string(proto_field.substr(9));
  return std::string(proto_field);
}

HttpApiError ToHttpError(const absl::Status& status) {
  HttpApiError e;
  std::string message(status.message());
  // "field: why" -> the JSON field of `field`.
  std::string param;
  if (const size_t colon = message.find(": "); colon != std::string::npos && colon > 0) {
    const std::string head = message.substr(0, colon);
    const bool is_field = std::all_of(head.begin(), head.end(), [](char c) {
      return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.';
    });
    if (is_field) {
      param = JsonFieldOf(head);
      message = absl::StrCat(param, message.substr(colon));
    }
  }
  e.message = message;
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      e.status = 400;
      e.param = param;
      e.code = "invalid_value";
      break;
    case absl::StatusCode::kFailedPrecondition:
      e.status = 400;
      e.param = param.empty() ? "n" : param;  // the images asked for need more than the server has
      e.code = "request_never_fits";
      break;
    case absl::StatusCode::kUnauthenticated:
      e.status = 401;
      e.type = "authentication_error";
      e.code = "invalid_api_key";
      break;
    case absl::StatusCode::kPermissionDenied:
      e.status = 403;
      e.type = "permission_error";
      e.param = param;
      e.code = "permission_denied";
      break;
    case absl::StatusCode::kResourceExhausted:
      e.status = 429;
      e.type = "rate_limit_error";
      e.code = absl::StartsWith(message, "API key") ? "key_limit_exceeded" : "queue_full";
      e.retry_after_s = 1;
      break;
    case absl::StatusCode::kUnavailable:
      e.status = 503;
      e.type = "server_error";
      e.code = "unavailable";
      e.retry_after_s = 1;
      break;
    case absl::StatusCode::kDeadlineExceeded:
      e.status = 504;
      e.type = "server_error";
      e.code = "timeout";
      break;
    case absl::StatusCode::kCancelled:
      e.status = 499;
      e.type = "invalid_request_error";
      e.code = "cancelled";
      break;
    default:
      e.status = 500;
      e.type = "server_error";
      e.code = "internal_error";
      break;
  }
  return e;
}

std::string ErrorBody(const HttpApiError& error) {
  json body;
  body["error"]["message"] = error.message;
  body["error"]["type"] = error.type;
  body["error"]["param"] = error.param.empty() ? json(nullptr) : json(error.param);
  body["error"]["code"] = error.code.empty() ? json(nullptr) : json(error.code);
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace argen::server
