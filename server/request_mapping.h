// Translation between the argen.v1 messages and the scheduler/engine types:
// defaults, events and status codes (model info: server/model_info.h). The
// ranges and limits are the engine's (engine/request_rules.h): the mapping
// fills defaults and calls the engine's one validation, so a bad request fails
// before it is queued.
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

// Defaults: num_images 0 means 1, unset sampling fields take
// config.default_sampling, unset seed takes `random_seed`, and the policy
// fields follow sparse::ApplyPolicyDefaults (the policy rule) over
// config.default_policy. Then engine::ValidateRequest against `info`.
absl::StatusOr<engine::GenerationRequest> ToGenerationRequest(const v1::GenerateRequest& request,
                                                              const ServerConfig& config, const engine::ModelInfo& info,
                                                              uint64_t random_seed);

// absl and gRPC share the canonical code numbering. The result carries the
// google.rpc.Status details of server/status_details.h.
grpc::Status ToGrpcStatus(const absl::Status& status);

// Converts one scheduler event; the image payload is moved out of `event`.
v1::GenerateEvent ToProtoEvent(scheduler::RequestEvent& event, const std::string& request_id);
void FillMetrics(const scheduler::RequestMetrics& metrics, v1::RequestMetrics* out);

}  // namespace argen::server
