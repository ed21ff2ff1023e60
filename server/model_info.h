// The one description of the served model for both APIs: gRPC GetModelInfo
// sends it as is, HTTP GET /v1/models renders it as JSON
// (server/http_images_api.cc). The limits are the engine's
// (engine::ModelInfo: sized from "auto" and enforced), never the raw config
// values, which are 0 for "auto"; the ranges are
// engine::RequestParameterRanges(info), so what is advertised is what is
// enforced; the defaults (policy, sampling) and queue_limit are the server's.
#pragma once

#include "argen/v1/argen.pb.h"
#include "engine/engine.h"
#include "server/server_config.h"

namespace argen::server {

// `info`: the loaded engine's; `config`: the server's, after the model's
// sampling defaults were applied (RequestGate::config()).
void FillModelInfo(const engine::ModelInfo& info, const ServerConfig& config, v1::ModelInfo* out);

}  // namespace argen::server
