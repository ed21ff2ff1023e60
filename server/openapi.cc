#include "server/openapi.h"

#include "common/version.h"

namespace argen::server {
namespace {

using nlohmann::json;

json Ref(const char* name) { return {{"$ref", std::string("#/components/schemas/") + name}}; }

json JsonResponse(const char* description, const char* schema) {
  return {{"description", description}, {"content", {{"application/json", {{"schema", Ref(schema)}}}}}};
}

json ErrorResponses(std::initializer_list<const char*> codes) {
  json out = json::object();
  for (const char* code : codes) out[code] = JsonResponse("an error in OpenAI's shape", "Error");
  return out;
}

json ImagesRequestSchema() {
  auto string = [](const char* description) { return json{{"type", "string"}, {"description", description}}; };
  auto integer = [](const char* description) { return json{{"type", "integer"}, {"description", description}}; };
  auto number = [](const char* description) { return json{{"type", "number"}, {"description", description}}; };
  return {{"type", "object"},
          {"required", {"prompt"}},
          {"additionalProperties", true},
          {"description",
           "OpenAI's images request plus argen's fields. Unknown fields are ignored and listed in a Warning header "
           "(http.strict_fields: 400 instead)."},
          {"properties",
           {{"prompt", string("what to draw")},
            {"negative_prompt", string("the unconditional (guidance) prompt; empty: the family's default")},
            {"model", string("the served model or one of its served_model_names; other names: 404")},
            {"n", integer("images, 1 to max_images_per_request")},
            {"size", string("WxH, one of the model's sizes (GET /v1/models), or auto")},
            {"response_format", {{"type", "string"}, {"enum", {"b64_json"}}}},
            {"output_format", {{"type", "string"}, {"enum", {"png", "jpeg"}}}},
            {"output_compression", integer("jpeg quality, 0-100")},
            {"quality", {{"type", "string"}, {"description", "accepted for compatibility; no effect"}}},
            {"background", {{"type", "string"}, {"enum", {"auto", "opaque"}}}},
            {"moderation", {{"type", "string"}, {"enum", {"auto", "low"}}}},
            {"style", {{"type", "string"}, {"enum", {"vivid", "natural"}}}},
            {"user", string("end-user id (checked, not stored)")},
            {"safety_identifier", string("end-user id (checked, not stored)")},
            {"stream", {{"type", "boolean"}, {"description", "server-sent events: partial and completed images"}}},
            {"partial_images", integer("previews while streaming, 0-3")},
            {"seed", integer("sampling seed >= 0; unset: chosen and reported")},
            {"guidance_scale", number("classifier-free guidance weight")},
            {"temperature", number("sampling temperature; 0: greedy")},
            {"top_k", integer("top-k; 0: off")},
            {"top_p", number("top-p in (0, 1]")},
            {"policy",
             {{"description", "sparsity policy: a name or {name, sparsity, n_att, n_recent, n_sink, kv_cache_dtype}"},
              {"oneOf", {{{"type", "string"}}, {{"type", "object"}}}}}},
            {"priority", {{"type", "string"}, {"enum", {"low", "normal", "high"}}}},
            {"request_id", string("the request's id (also the X-Request-Id header); unset: assigned")}}}};
}

}  // namespace

json OpenApiDocument() {
  const json request_id_header = {{"name", "X-Request-Id"},
                                  {"in", "header"},
                                  {"required", false},
                                  {"schema", {{"type", "string"}}},
                                  {"description", "echoed; names the generation unless the body's request_id does"}};
  json paths;
  json generate_responses = ErrorResponses({"400", "401", "403", "404", "413", "429", "503"});
  json streamed = {{"type", "string"},
                   {"description", "events image_generation.partial_image, image_generation.completed, error"}};
  generate_responses["200"] = {
      {"description", "the images (stream: false), or server-sent events (stream: true)"},
      {"content",
       {{"application/json", {{"schema", Ref("ImagesResponse")}}}, {"text/event-stream", {{"schema", streamed}}}}}};
  paths["/v1/images/generations"]["post"] = {
      {"operationId", "createImage"},
      {"summary", "generate images (OpenAI images API)"},
      {"parameters", {request_id_header}},
      {"requestBody", {{"required", true}, {"content", {{"application/json", {{"schema", ImagesRequestSchema()}}}}}}},
      {"responses", generate_responses}};
  paths["/v1/models"]["get"] = {{"operationId", "listModels"},
                                {"summary", "the served model, once per name, with its enforced limits"},
                                {"responses", {{"200", JsonResponse("the list", "ModelList")}}}};
  paths["/v1/models/{model}"]["get"] = {
      {"operationId", "retrieveModel"},
      {"summary", "one served name"},
      {"parameters", {{{"name", "model"}, {"in", "path"}, {"required", true}, {"schema", {{"type", "string"}}}}}},
      {"responses", {{"200", JsonResponse("the model", "Model")}, {"404", JsonResponse("not served here", "Error")}}}};
  paths["/health"]["get"] = {{"operationId", "health"},
                             {"summary", "liveness: 200 while the process serves HTTP"},
                             {"responses", {{"200", JsonResponse("alive", "Status")}}}};
  paths["/ready"]["get"] = {
      {"operationId", "ready"},
      {"summary", "readiness: 200 once the model is loaded; 503 while loading or draining"},
      {"responses", {{"200", JsonResponse("ready", "Status")}, {"503", JsonResponse("not ready", "Status")}}}};
  paths["/openapi.json"]["get"] = {
      {"operationId", "openapi"},
      {"summary", "this document"},
      {"responses", {{"200", {{"description", "OpenAPI 3.1"}, {"content", {{"application/json", json::object()}}}}}}}};
  paths["/"]["get"] = {
      {"operationId", "playground"},
      {"summary", "the playground page: prompts in, rows painted as they stream"},
      {"responses", {{"200", {{"description", "HTML"}, {"content", {{"text/html", json::object()}}}}}}}};

  json schemas;
  schemas["Error"] = {{"type", "object"},
                      {"properties",
                       {{"error",
                         {{"type", "object"},
                          {"properties",
                           {{"message", {{"type", "string"}}},
                            {"type", {{"type", "string"}}},
                            {"param", {{"type", {"string", "null"}}}},
                            {"code", {{"type", {"string", "null"}}}}}}}}}}};
  json image_item = {{"type", "object"}, {"properties", {{"b64_json", {{"type", "string"}}}}}};
  schemas["ImagesResponse"] = {
      {"type", "object"},
      {"properties",
       {{"created", {{"type", "integer"}}},
        {"data", {{"type", "array"}, {"items", image_item}}},
        {"output_format", {{"type", "string"}}},
        {"size", {{"type", "string"}}},
        {"usage", {{"type", "object"}}},
        {"argen", {{"type", "object"}, {"description", "request_id, seed, policy, kv_cache_dtype, metrics"}}}}}};
  schemas["Model"] = {{"type", "object"},
                      {"properties",
                       {{"id", {{"type", "string"}}},
                        {"object", {{"type", "string"}}},
                        {"created", {{"type", "integer"}}},
                        {"owned_by", {{"type", "string"}}},
                        {"argen", {{"type", "object"}, {"description", "sizes, limits, policies, defaults"}}}}}};
  schemas["ModelList"] = {
      {"type", "object"},
      {"properties", {{"object", {{"type", "string"}}}, {"data", {{"type", "array"}, {"items", Ref("Model")}}}}}};
  schemas["Status"] = {{"type", "object"}, {"properties", {{"status", {{"type", "string"}}}}}};

  return {{"openapi", "3.1.0"},
          {"info",
           {{"title", "argen HTTP API"},
            {"version", std::string(Version())},
            {"description", "OpenAI-compatible image generation (docs/serving.md)"}}},
          {"paths", paths},
          {"components", {{"schemas", schemas}}}};
}

}  // namespace argen::server
