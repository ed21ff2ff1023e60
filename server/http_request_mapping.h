// The OpenAI images API request body -> argen.v1.GenerateRequest, as a pure
// function (no I/O, no server state), so it can be tested and fuzzed alone.
//
// POST /v1/images/generations accepts OpenAI's fields (prompt, n, size,
// response_format, output_format, output_compression, quality, background,
// moderation, style, user, safety_identifier, stream, partial_images, model)
// and argen's own (seed, guidance_scale, temperature, top_k, top_p, policy,
// priority, request_id). This layer checks only what is HTTP-specific: JSON
// types, OpenAI's own values (size one of the model's as "WxH",
// response_format b64_json, partial_images 0-3, ...), the model name (or an
// alias: 404 model_not_found), unknown fields (ignored and reported, or 400
// with strict_fields: SDKs add fields faster than servers learn them). Value ranges of the shared fields (n, sampling,
// policy) are checked once, for gRPC and HTTP alike, by
// server/request_mapping's ToGenerationRequest and the scheduler;
// ToHttpError turns their errors (which name the GenerateRequest field) into
// OpenAI-shaped errors naming the JSON field.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "argen/v1/argen.pb.h"

namespace argen::server {

// An error response: HTTP status and OpenAI's
// {"error": {"message", "type", "param", "code"}} (empty param/code: null).
struct HttpApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;
  std::string code;
  int retry_after_s = 0;  // > 0: a Retry-After header
};

// What the mapping needs to know about the served model.
struct ImagesApiModel {
  std::string model;       // the id /v1/models lists
  int32_t image_size = 0;  // square images of this many pixels per side (when default_size is empty)
  bool jpeg = false;       // output_format jpeg available
  // "WxH" of every size `size` may name, and the default ("auto"); empty:
  // image_size square alone.
  std::vector<std::string> sizes;
  std::string default_size;
  std::vector<std::string> aliases;  // other names `model` may give (served_model_names)
  bool strict_fields = false;        // unknown fields: 400 (else ignored, listed in ignored_fields)
};

struct ImagesRequest {
  v1::GenerateRequest generate;  // previews = partial_images when streaming
  bool stream = false;
  int32_t partial_images = 0;
  std::string output_format = "png";  // png | jpeg
  int32_t output_compression = 90;    // jpeg quality, 0-100
  std::string size;                   // "WxH" as answered
  std::string user;
  std::vector<std::string> ignored_fields;  // unknown fields (not strict_fields), by name
};

// Nesting deeper than this is refused before parsing.
inline constexpr int kMaxJsonDepth = 32;
inline constexpr size_t kMaxUserBytes = 256;

std::variant<ImagesRequest, HttpApiError> ParseImagesRequest(absl::string_view body, const ImagesApiModel& model);

// The HTTP form of a status from the shared path: INVALID_ARGUMENT 400 (param
// = the JSON field named first in the message), FAILED_PRECONDITION 400
// (request_never_fits, param n),
// UNAUTHENTICATED 401, PERMISSION_DENIED 403, RESOURCE_EXHAUSTED 429 and
// UNAVAILABLE 503 (both with Retry-After), DEADLINE_EXCEEDED 504, CANCELLED
// 499, anything else 500.
HttpApiError ToHttpError(const absl::Status& status);

// The JSON field of a GenerateRequest field ("num_images" -> "n", ...).
std::string JsonFieldOf(absl::string_view proto_field);

// {"error": {...}} as JSON text.
std::string ErrorBody(const HttpApiError& error);

}  // namespace argen::server
