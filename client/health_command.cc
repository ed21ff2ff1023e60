#include <chrono>
#include <iostream>

#include "client/commands.h"
#include "client/flags.h"
#include "client/generate_call.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace argen::client {

int RunHealth(const CommonOptions& common, const std::vector<std::string>& args, std::ostream& out,
              std::ostream& err) {
  absl::StatusOr<Flags> flags = Flags::Parse(args, {"service"});
  if (!flags.ok()) {
    err << "argen_client health: " << flags.status().message() << "\n";
    return kUsage;
  }
  auto stub = grpc::health::v1::Health::NewStub(MakeChannel(common.server, common.max_message_bytes, common.security));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(
                           (common.timeout_seconds > 0 ? common.timeout_seconds : 5) * 1000)));
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(flags->String("service"));
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) return ReportRpcError("health", common.server, status, err);
  const std::string name = grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status());
  out << name << "\n";
  return response.status() == grpc::health::v1::HealthCheckResponse::SERVING ? kOk : kServerError;
}

}  // namespace argen::client
