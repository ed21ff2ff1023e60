// Fuzzes the HTTP API's request body (server/http_request_mapping.cc: JSON
// of POST /v1/images/generations -> GenerateRequest), then the shared
// mapping every accepted body goes through (server/request_mapping.cc), and
// the error rendering. A body that maps must map to a request whose shared
// checks give INVALID_ARGUMENT or OK, and every error must render as JSON.
#include <string_view>

#include "nlohmann/json.hpp"
#include "server/http_request_mapping.h"
#include "server/request_mapping.h"
#include "tests/fuzz/fuzz_driver.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace argen::server;
  const absl::string_view body(reinterpret_cast<const char*>(data), size);
  ImagesApiModel model;
  model.model = "tiny";
  model.image_size = 32;
  model.jpeg = true;
  std::variant<ImagesRequest, HttpApiError> parsed = ParseImagesRequest(body, model);
  if (auto* error = std::get_if<HttpApiError>(&parsed)) {
    if (error->status < 400 || error->status > 599) __builtin_trap();
    const std::string text = ErrorBody(*error);
    if (nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false).is_discarded()) __builtin_trap();
    return 0;
  }
  const ImagesRequest& request = std::get<ImagesRequest>(parsed);
  ServerConfig config;
  config.model_dir = "tiny";
  // The engine's limits, as the gate passes them (a tiny 8x8-token model).
  argen::engine::ModelInfo info;
  info.max_prompt_tokens = 64;
  info.max_images_per_request = 4;
  info.max_batch_rows = 64;
  info.image_size = 32;
  info.token_grid = 8;
  info.image_tokens = 64;
  info.image_vocab = 64;
  absl::StatusOr<argen::engine::GenerationRequest> mapped =
      ToGenerationRequest(request.generate, config, info, /*random_seed=*/3);
  if (!mapped.ok()) {
    if (mapped.status().code() != absl::StatusCode::kInvalidArgument) __builtin_trap();
    const HttpApiError error = ToHttpError(mapped.status());
    if (error.status != 400) __builtin_trap();
    (void)ErrorBody(error);
  }
  return 0;
}
