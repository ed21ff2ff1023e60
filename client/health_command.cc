#include <chrono>
#include <iostream>

#include "client/commands.h"
#include "client/generate_call.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace argen::client {

int RunHealth(const CommonOptions& common, const HealthOptions& options, std::ostream& out, std::ostream& err) {
  auto stub = grpc::health::v1::Health::NewStub(MakeChannel(common.server, common.max_message_bytes, common.security));
  grpc::ClientContext context;
  PrepareContext(context, common.timeout_seconds > 0 ? common.timeout_seconds : 5);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(options.service);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) return ReportRpcError("health", common.server, status, err);
  const std::string name = grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
  out << name << "\n";
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING ? kOk : kServerError;
}

}  // namespace argen::client
