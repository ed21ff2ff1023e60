// The OpenAPI 3.1 document GET /openapi.json serves: the HTTP API's routes,
// their request and response shapes. Written out by hand (not derived from
// the route table), so tests/serving/http_conformance_test.cc can check that
// it and the routes the server registers name the same set.
#pragma once

#include "nlohmann/json.hpp"

namespace argen::server {

nlohmann::json OpenApiDocument();

}  // namespace argen::server
