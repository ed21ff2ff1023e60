// The OpenAI images request body -> GenerateRequest mapping (pure): every
// field lands where it should, every bad field is a 400 naming it (param),
// and errors of the shared validation come back naming the JSON field.
#include "server/http_request_mapping.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "server/request_mapping.h"

namespace argen::server {
namespace {

const ImagesApiModel kModel{"tiny", 32, /*jpeg=*/false};

ImagesRequest ParseOk(const std::string& body) {
  std::variant<ImagesRequest, HttpApiError> r = ParseImagesRequest(body, kModel);
  if (auto* e = std::get_if<HttpApiError>(&r)) {
    ADD_FAILURE() << body << " -> " << e->message;
    return {};
  }
  return std::get<ImagesRequest>(std::move(r));
}

HttpApiError ParseBad(const std::string& body) {
  std::variant<ImagesRequest, HttpApiError> r = ParseImagesRequest(body, kModel);
  if (!std::holds_alternative<HttpApiError>(r)) {
    ADD_FAILURE() << body << " was accepted";
    return {};
  }
  return std::get<HttpApiError>(r);
}

TEST(HttpRequestMappingTest, OpenAiAndArgenFieldsMapOntoTheGenerateRequest) {
  const ImagesRequest r = ParseOk(R"({
    "prompt": "a red circle", "n": 2, "size": "32x32", "response_format": "b64_json",
    "output_format": "png", "quality": "auto", "background": "opaque", "moderation": "auto",
    "user": "u-1", "model": "tiny", "stream": true, "partial_images": 2,
    "seed": 18446744073709551615, "guidance_scale": 3.5, "temperature": 0.9, "top_k": 40, "top_p": 0.95,
    "policy": {"name": "diagonal", "sparsity": 0.9, "n_att": 0, "n_recent": 16, "n_sink": 4},
    "priority": "high", "style": null})");
  const v1::GenerateRequest& g = r.generate;
  EXPECT_EQ(g.prompt(), "a red circle");
  EXPECT_EQ(g.num_images(), 2);
  EXPECT_EQ(g.seed(), 18446744073709551615ull);
  EXPECT_FLOAT_EQ(g.cfg_weight(), 3.5f);
  EXPECT_FLOAT_EQ(g.temperature(), 0.9f);
  EXPECT_EQ(g.top_k(), 40);
  EXPECT_FLOAT_EQ(g.top_p(), 0.95f);
  EXPECT_EQ(g.policy().name(), "diagonal");
  EXPECT_DOUBLE_EQ(g.policy().sparsity(), 0.9);
  EXPECT_TRUE(g.policy().has_n_att());
  EXPECT_EQ(g.policy().n_recent(), 16);
  EXPECT_EQ(g.policy().n_sink(), 4);
  EXPECT_EQ(g.priority(), v1::PRIORITY_HIGH);
  EXPECT_EQ(g.previews(), 2);
  EXPECT_TRUE(r.stream);
  EXPECT_EQ(r.partial_images, 2);
  EXPECT_EQ(r.user, "u-1");
  EXPECT_EQ(r.size, "32x32");
  EXPECT_EQ(r.output_format, "png");
}

TEST(HttpRequestMappingTest, MinimalRequestLeavesEverythingToTheServerDefaults) {
  const ImagesRequest r = ParseOk(R"({"prompt": "x"})");
  EXPECT_EQ(r.generate.num_images(), 0);  // the shared default: 1
  EXPECT_FALSE(r.generate.has_seed());
  EXPECT_FALSE(r.generate.has_cfg_weight());
  EXPECT_FALSE(r.generate.has_temperature());
  EXPECT_TRUE(r.generate.policy().name().empty());
  EXPECT_EQ(r.generate.priority(), v1::PRIORITY_UNSPECIFIED);
  EXPECT_FALSE(r.stream);
  EXPECT_EQ(r.size, "32x32");
  // A policy by name alone; "auto" size; partial_images without stream asks no previews.
  const ImagesRequest named = ParseOk(R"({"prompt": "x", "policy": "dense", "size": "auto", "partial_images": 3})");
  EXPECT_EQ(named.generate.policy().name(), "dense");
  EXPECT_EQ(named.generate.previews(), 0);
}

TEST(HttpRequestMappingTest, EveryBadFieldIsA400NamingIt) {
  struct Case {
    const char* body;
    const char* param;
    const char* says;
  };
  const Case cases[] = {
      {R"({"n": 1})", "prompt", "required"},
      {R"({"prompt": 5})", "prompt", "must be a string"},
      {R"({"prompt": "x", "n": 0})", "n", "must be >= 1"},
      {R"({"prompt": "x", "n": 1.5})", "n", "must be an integer"},
      {R"({"prompt": "x", "n": "2"})", "n", "must be an integer"},
      {R"({"prompt": "x", "n": 99999999999})", "n", "32-bit"},
      {R"({"prompt": "x", "size": "1024x1024"})", "size", "sizes: 32x32, auto"},
      {R"({"prompt": "x", "response_format": "url"})", "response_format", "use 'b64_json'"},
      {R"({"prompt": "x", "response_format": "jpeg"})", "response_format", "not one of"},
      {R"({"prompt": "x", "output_format": "webp"})", "output_format", "not one of png"},
      {R"({"prompt": "x", "output_format": "jpeg"})", "output_format", "not one of png"},  // no jpeg here
      {R"({"prompt": "x", "output_compression": 101})", "output_compression", "[0, 100]"},
      {R"({"prompt": "x", "quality": "ultra"})", "quality", "not one of"},
      {R"({"prompt": "x", "background": "transparent"})", "background", "opaque"},
      {R"({"prompt": "x", "moderation": "none"})", "moderation", "not one of"},
      {R"({"prompt": "x", "style": "cubist"})", "style", "not one of"},
      {R"({"prompt": "x", "user": 7})", "user", "must be a string"},
      {R"({"prompt": "x", "stream": "yes"})", "stream", "must be a boolean"},
      {R"({"prompt": "x", "partial_images": 4})", "partial_images", "[0, 3]"},
      {R"({"prompt": "x", "partial_images": -1})", "partial_images", "[0, 3]"},
      {R"({"prompt": "x", "seed": -1})", "seed", ">= 0"},
      {R"({"prompt": "x", "seed": 1.5})", "seed", ">= 0"},
      {R"({"prompt": "x", "guidance_scale": "high"})", "guidance_scale", "must be a number"},
      {R"({"prompt": "x", "temperature": true})", "temperature", "must be a number"},
      {R"({"prompt": "x", "top_k": 2.5})", "top_k", "must be an integer"},
      {R"({"prompt": "x", "top_p": []})", "top_p", "must be a number"},
      {R"({"prompt": "x", "policy": 3})", "policy", "policy name or an object"},
      {R"({"prompt": "x", "policy": {"name": 1}})", "policy.name", "must be a string"},
      {R"({"prompt": "x", "policy": {"sparsity": "a lot"}})", "policy.sparsity", "must be a number"},
      {R"({"prompt": "x", "policy": {"n_att": 1.5}})", "policy.n_att", "must be an integer"},
      {R"({"prompt": "x", "policy": {"window": 4}})", "policy.window", "unknown policy parameter"},
      {R"({"prompt": "x", "priority": "urgent"})", "priority", "not one of low, normal, high"},
  };
  for (const Case& c : cases) {
    const HttpApiError e = ParseBad(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.type, "invalid_request_error") << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_EQ(e.message.rfind(std::string(c.param) + ": ", 0), 0u) << c.body << " -> " << e.message;
    EXPECT_NE(e.message.find(c.says), std::string::npos) << c.body << " -> " << e.message;
  }
}

// A wrong model is 404 model_not_found (OpenAI's answer); served_model_names
// aliases are accepted.
TEST(HttpRequestMappingTest, ModelMustBeTheServedNameOrAnAlias) {
  HttpApiError e = ParseBad(R"({"prompt": "x", "model": "dall-e-3"})");
  EXPECT_EQ(e.status, 404);
  EXPECT_EQ(e.param, "model");
  EXPECT_EQ(e.code, "model_not_found");
  EXPECT_NE(e.message.find("serves 'tiny'"), std::string::npos) << e.message;
  ImagesApiModel aliased = kModel;
  aliased.aliases = {"dall-e-3", "gpt-image-1"};
  for (const char* name : {"tiny", "dall-e-3", "gpt-image-1"}) {
    EXPECT_TRUE(std::holds_alternative<ImagesRequest>(
        ParseImagesRequest(absl::StrCat(R"({"prompt": "x", "model": ")", name, R"("})"), aliased)))
        << name;
  }
  std::variant<ImagesRequest, HttpApiError> other = ParseImagesRequest(R"({"prompt": "x", "model": "x"})", aliased);
  ASSERT_TRUE(std::holds_alternative<HttpApiError>(other));
  EXPECT_NE(std::get<HttpApiError>(other).message.find("(also 'dall-e-3', 'gpt-image-1')"), std::string::npos)
      << std::get<HttpApiError>(other).message;
}

// Unknown fields are listed and ignored; with strict_fields they are a 400
// naming the field. SDK fields argen knows (safety_identifier, request_id) map.
TEST(HttpRequestMappingTest, UnknownFieldsAreIgnoredUnlessStrict) {
  const ImagesRequest r =
      ParseOk(R"({"prompt": "x", "promt": "typo", "safety_identifier": "u-1", "request_id": "r-1", "extra": {}})");
  EXPECT_EQ(r.ignored_fields, (std::vector<std::string>{"extra", "promt"}));  // by name
  EXPECT_EQ(r.generate.request_id(), "r-1");
  ImagesApiModel strict = kModel;
  strict.strict_fields = true;
  std::variant<ImagesRequest, HttpApiError> bad = ParseImagesRequest(R"({"prompt": "x", "promt": "typo"})", strict);
  ASSERT_TRUE(std::holds_alternative<HttpApiError>(bad));
  const HttpApiError& e = std::get<HttpApiError>(bad);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "promt");
  EXPECT_EQ(e.code, "unknown_parameter");
  EXPECT_EQ(e.message.rfind("promt: unknown parameter", 0), 0u) << e.message;
  EXPECT_TRUE(std::holds_alternative<ImagesRequest>(
      ParseImagesRequest(R"({"prompt": "x", "safety_identifier": "u-1"})", strict)));
}

// parallel_window (an argen extension) maps onto the GenerateRequest field;
// a non-integer is a 400 naming it, and the shared validation's range error
// comes back naming it too.
TEST(HttpRequestMappingTest, ParallelWindowMapsAndBadValuesNameIt) {
  EXPECT_EQ(ParseOk(R"({"prompt": "x", "parallel_window": 8})").generate.parallel_window(), 8);
  EXPECT_FALSE(ParseOk(R"({"prompt": "x"})").generate.has_parallel_window());
  for (const char* body :
       {R"({"prompt": "x", "parallel_window": 1.5})", R"({"prompt": "x", "parallel_window": "8"})"}) {
    const HttpApiError e = ParseBad(body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.param, "parallel_window") << body;
  }
  const HttpApiError range = ToHttpError(absl::InvalidArgumentError("parallel_window: must be in [0, 24], got 99"));
  EXPECT_EQ(range.status, 400);
  EXPECT_EQ(range.param, "parallel_window");
}

// speculative_window, the same way.
TEST(HttpRequestMappingTest, SpeculativeWindowMapsAndBadValuesNameIt) {
  EXPECT_EQ(ParseOk(R"({"prompt": "x", "speculative_window": 4})").generate.speculative_window(), 4);
  EXPECT_FALSE(ParseOk(R"({"prompt": "x"})").generate.has_speculative_window());
  for (const char* body :
       {R"({"prompt": "x", "speculative_window": 1.5})", R"({"prompt": "x", "speculative_window": "4"})"}) {
    const HttpApiError e = ParseBad(body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.param, "speculative_window") << body;
  }
  const HttpApiError range =
      ToHttpError(absl::InvalidArgumentError("speculative_window: must be in [0, 32] (0: off), got 99"));
  EXPECT_EQ(range.status, 400);
  EXPECT_EQ(range.param, "speculative_window");
}

// A model of several sizes: `size` "WxH" maps onto width and height, "auto"
// (or none) leaves both unset, and a malformed or unsupported size is a 400
// naming `size` with the sizes.
TEST(HttpRequestMappingTest, SizeMapsOntoWidthAndHeight) {
  ImagesApiModel model{"lumina", 128, /*jpeg=*/false};
  model.sizes = {"128x64", "64x128"};
  model.default_size = "128x64";
  auto parse = [&](const std::string& body) { return ParseImagesRequest(body, model); };
  std::variant<ImagesRequest, HttpApiError> r = parse(R"({"prompt": "x", "size": "64x128"})");
  ASSERT_TRUE(std::holds_alternative<ImagesRequest>(r)) << std::get<HttpApiError>(r).message;
  EXPECT_EQ(std::get<ImagesRequest>(r).generate.width(), 64);
  EXPECT_EQ(std::get<ImagesRequest>(r).generate.height(), 128);
  EXPECT_EQ(std::get<ImagesRequest>(r).size, "64x128");
  for (const char* body : {R"({"prompt": "x", "size": "auto"})", R"({"prompt": "x"})"}) {
    r = parse(body);
    ASSERT_TRUE(std::holds_alternative<ImagesRequest>(r)) << body;
    EXPECT_EQ(std::get<ImagesRequest>(r).generate.width(), 0) << body;
    EXPECT_EQ(std::get<ImagesRequest>(r).generate.height(), 0) << body;
    EXPECT_EQ(std::get<ImagesRequest>(r).size, "128x64") << body;
  }
  for (const char* size : {"64x64", "64 x 128", "x128", "64x", "64x128x2", "-64x128", "0x0", "64X128", "999999x1"}) {
    r = parse(absl::StrCat(R"({"prompt": "x", "size": ")", size, R"("})"));
    ASSERT_TRUE(std::holds_alternative<HttpApiError>(r)) << size;
    const HttpApiError& e = std::get<HttpApiError>(r);
    EXPECT_EQ(e.status, 400) << size;
    EXPECT_EQ(e.param, "size") << size;
    EXPECT_EQ(e.message.rfind("size: ", 0), 0u) << e.message;
  }
  r = parse(R"({"prompt": "x", "size": "64x64"})");
  EXPECT_NE(std::get<HttpApiError>(r).message.find("sizes: 128x64, 64x128, auto"), std::string::npos)
      << std::get<HttpApiError>(r).message;
  // The shared path's size errors name `size` too.
  EXPECT_EQ(ToHttpError(absl::InvalidArgumentError("width: image size 1x1 is not supported")).param, "size");
  EXPECT_EQ(ToHttpError(absl::InvalidArgumentError("height: must be set with width")).param, "size");
}

TEST(HttpRequestMappingTest, BodiesThatAreNotAJsonObject) {
  for (const std::string& body :
       {std::string(""), std::string("  "), std::string("{"), std::string("[1]"), std::string("\"prompt\""),
        std::string("{\"prompt\": \"\xff\"}"), std::string(100, '[') + std::string(100, ']')}) {
    const HttpApiError e = ParseBad(body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_TRUE(e.param.empty()) << body;
    EXPECT_FALSE(e.message.empty());
  }
  // Nesting inside strings does not count.
  ParseOk(R"({"prompt": ")" + std::string(100, '[') + R"("})");
}

TEST(HttpRequestMappingTest, SharedValidationErrorsNameTheJsonField) {
  // The shared path (gRPC's too) speaks GenerateRequest field names.
  // The limits are the engine's (ModelInfo), as the gate passes them.
  ServerConfig config;
  engine::ModelInfo info;
  info.max_prompt_tokens = 64;
  info.max_images_per_request = 4;
  info.max_batch_rows = 64;
  info.image_tokens = 16;
  info.image_vocab = 64;
  const ImagesRequest r = ParseOk(R"({"prompt": "x", "n": 5})");
  absl::StatusOr<engine::GenerationRequest> mapped = ToGenerationRequest(r.generate, config, info, 1);
  ASSERT_FALSE(mapped.ok());
  HttpApiError e = ToHttpError(mapped.status());
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "n");
  EXPECT_EQ(e.message.rfind("n: must be in [1, 4]", 0), 0u) << e.message;

  const ImagesRequest w = ParseOk(R"({"prompt": "x", "guidance_scale": -1})");
  e = ToHttpError(ToGenerationRequest(w.generate, config, info, 1).status());
  EXPECT_EQ(e.param, "guidance_scale");
  const ImagesRequest p = ParseOk(R"({"prompt": "x", "policy": {"name": "diagonal", "sparsity": 1.5}})");
  e = ToHttpError(ToGenerationRequest(p.generate, config, info, 1).status());
  EXPECT_EQ(e.param, "policy.sparsity");
  EXPECT_EQ(ToHttpError(absl::InvalidArgumentError("previews: must be in [0, 3]")).param, "partial_images");
  EXPECT_EQ(ToHttpError(absl::InvalidArgumentError("sampling.top_k: bad")).param, "top_k");
}

TEST(HttpRequestMappingTest, StatusCodesAndRetryAfter) {
  EXPECT_EQ(ToHttpError(absl::FailedPreconditionError("request can never fit: ...")).status, 400);
  EXPECT_EQ(ToHttpError(absl::UnauthenticatedError("invalid API key")).status, 401);
  const HttpApiError denied =
      ToHttpError(absl::PermissionDeniedError("priority: API key 'a' may ask for at most normal"));
  EXPECT_EQ(denied.status, 403);
  EXPECT_EQ(denied.param, "priority");
  const HttpApiError full = ToHttpError(absl::ResourceExhaustedError("queue full: 1 requests waiting"));
  EXPECT_EQ(full.status, 429);
  EXPECT_GT(full.retry_after_s, 0);
  EXPECT_EQ(full.code, "queue_full");
  EXPECT_EQ(ToHttpError(absl::ResourceExhaustedError("API key 'a' has 2 requests in flight")).code,
            "key_limit_exceeded");
  const HttpApiError draining = ToHttpError(absl::UnavailableError("server is draining"));
  EXPECT_EQ(draining.status, 503);
  EXPECT_GT(draining.retry_after_s, 0);
  EXPECT_EQ(ToHttpError(absl::DeadlineExceededError("x")).status, 504);
  EXPECT_EQ(ToHttpError(absl::InternalError("engine step failed: x")).status, 500);
}

TEST(HttpRequestMappingTest, ErrorBodyIsOpenAiShaped) {
  HttpApiError e;
  e.message = "n: must be >= 1";
  e.param = "n";
  e.code = "invalid_value";
  const nlohmann::json body = nlohmann::json::parse(ErrorBody(e));
  EXPECT_EQ(body["error"]["message"], "n: must be >= 1");
  EXPECT_EQ(body["error"]["type"], "invalid_request_error");
  EXPECT_EQ(body["error"]["param"], "n");
  EXPECT_EQ(body["error"]["code"], "invalid_value");
  HttpApiError bare;
  bare.message = "x";
  const nlohmann::json b = nlohmann::json::parse(ErrorBody(bare));
  EXPECT_TRUE(b["error"]["param"].is_null());
  EXPECT_TRUE(b["error"]["code"].is_null());
}

}  // namespace
}  // namespace argen::server
