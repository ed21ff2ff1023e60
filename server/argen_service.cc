#include "server/argen_service.h"

#include <chrono>
#include <variant>

#include "absl/time/clock.h"
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

}  // namespace

ArgenService::ArgenService(RequestGate* gate) : gate_(gate) {}

grpc::Status ArgenService::Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                                    grpc::ServerWriter<v1::GenerateEvent>* writer) {
  // One log line per request, whichever way it ends; PNGs get their metadata.
  RequestTrace trace("grpc", context->peer(), *request, gate_->PolicyLabel(*request));
  absl::StatusOr<const ApiKey*> key = gate_->Authorize(AuthorizationOf(*context), Right::kGenerate);
  if (!key.ok()) {
    trace.Ended(key.status());
    return ToGrpcStatus(key.status());
  }
  absl::StatusOr<Submission> submitted = gate_->Submit(*key, *request, DeadlineOf(*context));
  if (!submitted.ok()) {
    trace.Ended(submitted.status());
    return ToGrpcStatus(submitted.status());
  }
  scheduler::RequestHandle& h = *submitted->handle;
  trace.Submitted(h.id(), submitted->generation, gate_->info().name);

  bool client_gone = false;
  while (true) {
    if (!client_gone && context->IsCancelled()) {
      client_gone = true;
      // An expired deadline also cancels the context; let the scheduler
      // report it as DEADLINE_EXCEEDED.
      if (absl::Now() < h.deadline()) h.Cancel();
    }
    std::optional<scheduler::RequestEvent> event = h.Next(kPollInterval);
    if (!event) continue;
    trace.OnEvent(*event);
    if (std::holds_alternative<scheduler::StartedEvent>(*event)) submitted->lease.Started();
    if (auto* finished = std::get_if<scheduler::FinishedEvent>(&*event)) {
      if (!finished->status.ok()) return ToGrpcStatus(finished->status);
      if (!client_gone) writer->Write(ToProtoEvent(*event, h.id()));
      return grpc::Status::OK;
    }
    if (client_gone) continue;  // drain events until Finished
    const bool preview = std::holds_alternative<scheduler::PreviewEvent>(*event);
    if (!writer->Write(ToProtoEvent(*event, h.id()))) {
      client_gone = true;
      h.Cancel();
    } else if (preview && gate_->metrics() != nullptr) {
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
