// The argen.v1.ArGen gRPC service (synchronous API: each Generate stream
// holds one gRPC thread that relays its scheduler events). Keys, validation
// and submission go through the RequestGate the HTTP API shares.
#pragma once

#include "argen/v1/argen.grpc.pb.h"
#include "server/request_gate.h"

namespace argen::server {

class ArgenService final : public v1::ArGen::Service {
 public:
  explicit ArgenService(RequestGate* gate);

  grpc::Status Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                        grpc::ServerWriter<v1::GenerateEvent>* writer) override;
  grpc::Status GetModelInfo(grpc::ServerContext* context, const v1::GetModelInfoRequest* request,
                            v1::ModelInfo* response) override;

 private:
  RequestGate* const gate_;
};

}  // namespace argen::server
