// Server reflection v1 (grpc.reflection.v1.ServerReflection), beside the
// v1alpha service gRPC's own plugin provides: the Debian gRPC (1.51) predates
// v1, which current grpcurl and Postman ask first. It answers from the
// process's generated descriptor pool, so it can describe every service whose
// generated code is linked (argen.v1, grpc.health.v1, both reflections).
#pragma once

#include <memory>

#include "grpcpp/impl/server_builder_option.h"

namespace argen::server {

// Pass to ServerBuilder::SetOption before BuildAndStart.
std::unique_ptr<grpc::ServerBuilderOption> MakeReflectionV1Option();

}  // namespace argen::server
