#include "client/generate_call.h"

#include <algorithm>
#include <chrono>
#include <climits>

#include "absl/strings/str_cat.h"
#include "client/interrupt.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/client_interceptor.h"

namespace argen::client {

void PrepareContext(grpc::ClientContext& context, double timeout_seconds) {
  if (timeout_seconds > 0) {
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000)));
  }
}

absl::Status CheckImagesPerRequest(v1::ArGen::Stub& stub, double timeout_seconds,
                                   const std::vector<std::pair<int32_t, int>>& counts,
                                   const std::string& prompts_file) {
  int32_t most = 1;
  int line = 0;
  for (const auto& [count, at] : counts) {
    if (count > most) {
      most = count;
      line = at;
    }
  }
  if (most <= 1) return absl::OkStatus();
  grpc::ClientContext context;
  PrepareContext(context, timeout_seconds > 0 ? std::min(timeout_seconds, 10.0) : 10);
  v1::ModelInfo info;
  if (!stub.GetModelInfo(&context, v1::GetModelInfoRequest(), &info).ok()) return absl::OkStatus();
  if (info.max_images_per_request() <= 0 || most <= info.max_images_per_request()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      line > 0 ? absl::StrCat(prompts_file, ":", line, ": count ") : std::string("--count "), most,
      ": the server takes at most ", info.max_images_per_request(), " images per request (argen_client info)"));
}

GenerateResult CallGenerate(v1::ArGen::Stub& stub, const v1::GenerateRequest& request, const CallOptions& options,
                            const std::function<void(v1::GenerateEvent&)>& on_event) {
  GenerateResult result;
  const auto start = std::chrono::steady_clock::now();
  auto since_start = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  grpc::ClientContext context;
  PrepareContext(context, options.timeout_seconds);
  if (InterruptRequested()) {
    result.status = grpc::Status(grpc::StatusCode::CANCELLED, kNotSentMessage);
    return result;
  }
  const CancelOnInterrupt cancel_on_interrupt(context);
  std::unique_ptr<grpc::ClientReader<v1::GenerateEvent>> reader = stub.Generate(&context, request);
  v1::GenerateEvent event;
  while (reader->Read(&event)) {
    if (event.has_image()) {
      const double t = since_start();
      if (result.first_image_seconds < 0) result.first_image_seconds = t;
      result.image_seconds.push_back(t);
      ++result.images_received;
    }
    if (on_event) on_event(event);
    switch (event.event_case()) {
      case v1::GenerateEvent::kAccepted:
        result.accepted = event.accepted();
        break;
      case v1::GenerateEvent::kImage:
        if (options.keep_images) result.images.push_back(std::move(*event.mutable_image()));
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
  result.wall_seconds = since_start();
  return result;
}

GenerateResult CallGenerate(v1::ArGen::Stub& stub, const v1::GenerateRequest& request, double timeout_seconds,
                            const std::function<void(v1::GenerateEvent&)>& on_event) {
  CallOptions options;
  options.timeout_seconds = timeout_seconds;
  return CallGenerate(stub, request, options, on_event);
}

namespace {

// Adds the API key to every call's metadata (also on plaintext channels,
// where gRPC's call credentials would refuse to send it).
class ApiKeyInterceptor : public grpc::experimental::Interceptor {
 public:
  explicit ApiKeyInterceptor(const std::string& value) : value_(value) {}
  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(grpc::experimental::InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({"authorization", value_});
    }
    methods->Proceed();
  }

 private:
  const std::string& value_;
};

class ApiKeyInterceptorFactory : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  explicit ApiKeyInterceptorFactory(std::string api_key) : value_("Bearer " + std::move(api_key)) {}
  grpc::experimental::Interceptor* CreateClientInterceptor(grpc::experimental::ClientRpcInfo*) override {
    return new ApiKeyInterceptor(value_);
  }

 private:
  const std::string value_;
};

}  // namespace

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& target, int64_t max_message_bytes,
                                           const ChannelSecurity& security) {
  grpc::ChannelArguments args;
  const int limit = static_cast<int>(std::min<int64_t>(max_message_bytes, INT_MAX));
  args.SetMaxReceiveMessageSize(limit);
  args.SetMaxSendMessageSize(limit);
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!security.ca_pem.empty()) {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = security.ca_pem;
    tls.pem_cert_chain = security.cert_pem;
    tls.pem_private_key = security.key_pem;
    credentials = grpc::SslCredentials(tls);
  }
  if (security.api_key.empty()) return grpc::CreateCustomChannel(target, credentials, args);
  std::vector<std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface>> interceptors;
  interceptors.push_back(std::make_unique<ApiKeyInterceptorFactory>(security.api_key));
  return grpc::experimental::CreateCustomChannelWithInterceptors(target, credentials, args, std::move(interceptors));
}

}  // namespace argen::client
