// Translation between the argen.v1 messages and the scheduler/engine types:
// request validation and defaults (errors name the proto field), events,
// status codes and model info.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "argen/v1/argen.pb.h"
#include "engine/engine.h"
#include "grpcpp/support/status.h"
#include "scheduler/request_events.h"
#include "server/server_config.h"

namespace argen::server {

// Policy rule: an empty policy.name takes the configured default policy with
// its parameters; a named policy takes default_policy.sparsity (sparse
// policies only) and the default n_att/n_recent/n_sink only when it is the
// default policy. Fields set in the request always win.
absl::StatusOr<engine::GenerationRequest> ToGenerationRequest(const v1::GenerateRequest& request,
                                                              const ServerConfig& config,
                                                              int32_t image_tokens,
                                                              uint64_t random_seed);

// absl and gRPC share the canonical code numbering. The result carries the
// google.rpc.Status details of server/status_details.h.
grpc::Status ToGrpcStatus(const absl::Status& status);

// Converts one scheduler event; the image payload is moved out of `event`.
v1::GenerateEvent ToProtoEvent(scheduler::RequestEvent& event, const std::string& request_id);
void FillMetrics(const scheduler::RequestMetrics& metrics, v1::RequestMetrics* out);

void FillModelInfo(const engine::ModelInfo& info, const ServerConfig& config, v1::ModelInfo* out);

}  // namespace argen::server
