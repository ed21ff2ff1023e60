// The argen.v1.ArGen gRPC service (synchronous API: each Generate stream
// holds one gRPC thread that relays its scheduler events). Keys, validation
// and submission go through the RequestGate the HTTP API shares. Generate is
// registered with a raw request (server/generate_wire.h) so that requests
// protobuf would refuse (invalid UTF-8) get INVALID_ARGUMENT naming the field.
#pragma once

#include <memory>

#include "argen/v1/argen.grpc.pb.h"
#include "server/request_gate.h"
#include "server/request_trace.h"
#include "server/stream_watchdog.h"

namespace argen::server {

// Registered by hand (not through the generated ArGen::Service, whose
// Generate handler would parse the request itself); the method names come
// from the proto's service descriptor.
class ArgenService final : public grpc::Service {
 public:
  explicit ArgenService(RequestGate* gate);

  // What "/argen.v1.ArGen/Generate" runs: checks the key, parses `wire`,
  // then Generate().
  grpc::Status GenerateWire(grpc::ServerContext* context, const grpc::ByteBuffer* wire,
                            grpc::ServerWriter<v1::GenerateEvent>* writer);
  grpc::Status Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                        grpc::ServerWriter<v1::GenerateEvent>* writer);
  grpc::Status GetModelInfo(grpc::ServerContext* context, const v1::GetModelInfoRequest* request,
                            v1::ModelInfo* response);

 private:
  // Generate() after the key check.
  grpc::Status GenerateAuthorized(grpc::ServerContext* context, const ApiKey* key, const v1::GenerateRequest* request,
                                  grpc::ServerWriter<v1::GenerateEvent>* writer, RequestTrace& trace);

  RequestGate* const gate_;
  // Resets streams whose client stopped reading (stream_stall_timeout_s).
  const std::unique_ptr<StreamWatchdog> watchdog_;
};

}  // namespace argen::server
