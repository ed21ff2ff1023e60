#include "client/generate_call.h"

#include <algorithm>
#include <chrono>
#include <climits>

#include "grpcpp/create_channel.h"

namespace argen::client {

GenerateResult CallGenerate(v1::ArGen::Stub& stub, const v1::GenerateRequest& request,
                            double timeout_seconds,
                            const std::function<void(const v1::GenerateEvent&)>& on_event) {
  GenerateResult result;
  const auto start = std::chrono::steady_clock::now();
  grpc::ClientContext context;
  if (timeout_seconds > 0) {
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000)));
  }
  std::unique_ptr<grpc::ClientReader<v1::GenerateEvent>> reader = stub.Generate(&context, request);
  v1::GenerateEvent event;
  while (reader->Read(&event)) {
    if (on_event) on_event(event);
    switch (event.event_case()) {
      case v1::GenerateEvent::kAccepted:
        result.accepted = event.accepted();
        break;
      case v1::GenerateEvent::kImage:
        result.images.push_back(std::move(*event.mutable_image()));
        break;
      case v1::GenerateEvent::kMetrics:
        result.metrics = event.metrics();
        result.has_metrics = true;
        break;
      default:
        break;
    }
  }
  result.status = reader->Finish();
  result.wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target, int64_t max_message_bytes) {
  grpc::ChannelArguments args;
  const int limit = static_cast<int>(std::min<int64_t>(max_message_bytes, INT_MAX));
  args.SetMaxReceiveMessageSize(limit);
  args.SetMaxSendMessageSize(limit);
  return grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args);
}

}  // namespace argen::client
