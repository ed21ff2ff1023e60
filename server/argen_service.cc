#include "server/argen_service.h"

#include <chrono>
#include <map>
#include <string>
#include <variant>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpcpp/impl/rpc_service_method.h"
#include "grpcpp/support/method_handler.h"
#include "server/generate_wire.h"
#include "server/model_info.h"
#include "server/prometheus_metrics.h"
#include "server/request_mapping.h"
#include "server/request_trace.h"

namespace argen::server {
namespace {

// How often a waiting stream checks for client cancellation.
constexpr absl::Duration kPollInterval = absl::Milliseconds(20);

absl::Time DeadlineOf(const grpc::ServerContext& context) {
  const auto deadline = context.deadline();
  // No deadline reads as the far future; keep it infinite.
  if (deadline >= std::chrono::system_clock::now() + std::chrono::hours(24 * 365 * 50)) {
    return absl::InfiniteFuture();
  }
  return absl::FromChrono(deadline);
}

// The `authorization` metadata value ("" when absent).
absl::string_view AuthorizationOf(const grpc::ServerContext& context) {
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return {};
  return absl::string_view(it->second.data(), it->second.size());
}

// gRPC clients cancel their call when their own deadline passes, which is
// before the server's copy of it: the grpc-timeout header counts from when
// the client sent it, and gRPC rounds it up (to three significant figures,
// so by up to ~1%). A cancel that arrives within that gap plus a network
// allowance of the deadline is the deadline, not the client.
constexpr absl::Duration kDeadlineCancelSlack = absl::Milliseconds(200);

// Why a request whose call was cancelled (or whose stream broke) ends.
// `received`: when the call arrived (the server's timeout starts there).
absl::Status ClientGoneReason(absl::Time deadline, absl::Time received) {
  if (deadline != absl::InfiniteFuture() &&
      absl::Now() >= deadline - kDeadlineCancelSlack - (deadline - received) / 100) {
    return absl::DeadlineExceededError("request deadline expired");
  }
  return absl::CancelledError("request cancelled by the client");
}

// "/argen.v1.ArGen/<method>", from the descriptor (gRPC keeps the pointer,
// so the strings live as long as the process).
const char* MethodPath(const std::string& method) {
  static absl::Mutex mu;
  static auto* paths = new std::map<std::string, std::string>;
  absl::MutexLock lock(&mu);
  std::string& path = (*paths)[method];
  if (path.empty()) {
    const google::protobuf::ServiceDescriptor* service =
        v1::GenerateRequest::descriptor()->file()->FindServiceByName("ArGen");
    const google::protobuf::MethodDescriptor* m = service->FindMethodByName(method);
    path = "/" + service->full_name() + "/" + m->name();
  }
  return path.c_str();
}

}  // namespace

ArgenService::ArgenService(RequestGate* gate)
    : gate_(gate), watchdog_(std::make_unique<StreamWatchdog>(absl::Seconds(gate->config().stream_stall_timeout_s))) {
  QuietInvalidUtf8ParseLogs();
  AddMethod(new grpc::internal::RpcServiceMethod(
      MethodPath("Generate"), grpc::internal::RpcMethod::SERVER_STREAMING,
      new grpc::internal::ServerStreamingHandler<ArgenService, grpc::ByteBuffer, v1::GenerateEvent>(
          [](ArgenService* service, grpc::ServerContext* context, const grpc::ByteBuffer* wire,
             grpc::ServerWriter<v1::GenerateEvent>* writer) { return service->GenerateWire(context, wire, writer); },
          this)));
  AddMethod(new grpc::internal::RpcServiceMethod(
      MethodPath("GetModelInfo"), grpc::internal::RpcMethod::NORMAL_RPC,
      new grpc::internal::RpcMethodHandler<ArgenService, v1::GetModelInfoRequest, v1::ModelInfo>(
          [](ArgenService* service, grpc::ServerContext* context, const v1::GetModelInfoRequest* request,
             v1::ModelInfo* response) { return service->GetModelInfo(context, request, response); },
          this)));
}

grpc::Status ArgenService::GenerateWire(grpc::ServerContext* context, const grpc::ByteBuffer* wire,
                                        grpc::ServerWriter<v1::GenerateEvent>* writer) {
  // The key first: a caller without one learns nothing about its bytes.
  absl::StatusOr<const ApiKey*> key = gate_->Authorize(AuthorizationOf(*context), Right::kGenerate);
  if (!key.ok()) {
    RequestTrace("grpc", context->peer(), v1::GenerateRequest(), "invalid", gate_->metrics()).Ended(key.status());
    return ToGrpcStatus(key.status());
  }
  absl::StatusOr<v1::GenerateRequest> request = ParseGenerateRequest(*wire);
  if (!request.ok()) {
    if (gate_->metrics() != nullptr) {
      gate_->metrics()->OnRequestDone("invalid", request.status(), scheduler::RequestMetrics{});
    }
    // Logged without its fields: they are what could not be read.
    RequestTrace("grpc", context->peer(), v1::GenerateRequest(), "invalid", gate_->metrics()).Ended(request.status());
    return ToGrpcStatus(request.status());
  }
  // One log line per request, whichever way it ends; PNGs get their metadata.
  RequestTrace trace("grpc", context->peer(), *request, gate_->PolicyLabel(*request), gate_->metrics());
  return GenerateAuthorized(context, *key, &*request, writer, trace);
}

grpc::Status ArgenService::Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                                    grpc::ServerWriter<v1::GenerateEvent>* writer) {
  RequestTrace trace("grpc", context->peer(), *request, gate_->PolicyLabel(*request), gate_->metrics());
  absl::StatusOr<const ApiKey*> key = gate_->Authorize(AuthorizationOf(*context), Right::kGenerate);
  if (!key.ok()) {
    trace.Ended(key.status());
    return ToGrpcStatus(key.status());
  }
  return GenerateAuthorized(context, *key, request, writer, trace);
}

grpc::Status ArgenService::GenerateAuthorized(grpc::ServerContext* context, const ApiKey* key,
                                              const v1::GenerateRequest* request,
                                              grpc::ServerWriter<v1::GenerateEvent>* writer, RequestTrace& trace) {
  const absl::Time received = absl::Now();
  absl::StatusOr<Submission> submitted = gate_->Submit(key, *request, DeadlineOf(*context));
  if (!submitted.ok()) {
    trace.Ended(submitted.status());
    return ToGrpcStatus(submitted.status());
  }
  scheduler::RequestHandle& h = *submitted->handle;
  trace.Submitted(h.id(), submitted->generation, gate_->info().name);

  bool client_gone = false;
  // Every write goes through the watchdog: a client that stops reading gets
  // its call cancelled after stream_stall_timeout_s instead of holding this
  // thread (and its queued events) forever.
  auto write = [&](v1::GenerateEvent event) {
    bool stalled = false;
    if (watchdog_->Write(
            context, [&] { return writer->Write(event); }, &stalled))
      return true;
    client_gone = true;
    if (stalled && gate_->metrics() != nullptr) gate_->metrics()->OnStreamStalled();
    h.Cancel(stalled
                 ? absl::ResourceExhaustedError(absl::StrCat("client not reading its stream: no event accepted for ",
                                                             absl::ToDoubleSeconds(watchdog_->stall_timeout()),
                                                             " s (stream_stall_timeout_s); request cancelled"))
                 : ClientGoneReason(h.deadline(), received));
    return false;
  };
  while (true) {
    if (!client_gone && context->IsCancelled()) {
      client_gone = true;
      h.Cancel(ClientGoneReason(h.deadline(), received));
    }
    std::optional<scheduler::RequestEvent> event = h.Next(kPollInterval);
    if (!event) continue;
    trace.OnEvent(*event);
    if (std::holds_alternative<scheduler::StartedEvent>(*event)) submitted->lease.Started();
    if (auto* finished = std::get_if<scheduler::FinishedEvent>(&*event)) {
      if (!finished->status.ok()) return ToGrpcStatus(finished->status);
      if (!client_gone) write(ToProtoEvent(*event, h.id()));
      return grpc::Status::OK;
    }
    if (client_gone) continue;  // drain events until Finished
    const bool preview = std::holds_alternative<scheduler::PreviewEvent>(*event);
    if (write(ToProtoEvent(*event, h.id())) && preview && gate_->metrics() != nullptr) {
      gate_->metrics()->OnPreviewSent();
    }
  }
}

grpc::Status ArgenService::GetModelInfo(grpc::ServerContext* context, const v1::GetModelInfoRequest*,
                                        v1::ModelInfo* response) {
  absl::StatusOr<const ApiKey*> key = gate_->Authorize(AuthorizationOf(*context), Right::kInfo);
  if (!key.ok()) return ToGrpcStatus(key.status());
  FillModelInfo(gate_->info(), gate_->config(), response);
  return grpc::Status::OK;
}

}  // namespace argen::server
