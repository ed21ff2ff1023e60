#include "server/argen_service.h"

#include <chrono>
#include <variant>

#include "absl/time/clock.h"
#include "engine/sparse/policy_params.h"
#include "server/request_mapping.h"

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

}  // namespace

ArgenService::ArgenService(scheduler::Scheduler* scheduler, const engine::ModelInfo& info,
                           ServerConfig config, scheduler::SchedulerObserver* observer)
    : scheduler_(scheduler),
      info_(info),
      config_(std::move(config)),
      observer_(observer),
      seed_rng_(std::random_device{}()) {}

std::string ArgenService::PolicyLabel(const v1::GenerateRequest& request) const {
  if (request.policy().name().empty()) return std::string(sparse::PolicyName(config_.default_policy.kind));
  absl::StatusOr<sparse::PolicyKind> kind = sparse::ParsePolicyName(request.policy().name());
  return kind.ok() ? std::string(sparse::PolicyName(*kind)) : "invalid";
}

uint64_t ArgenService::RandomSeed() {
  absl::MutexLock lock(&seed_mu_);
  return seed_rng_() >> 11;  // 53 bits: exact in JSON/doubles for clients that print it
}

grpc::Status ArgenService::Generate(grpc::ServerContext* context, const v1::GenerateRequest* request,
                                    grpc::ServerWriter<v1::GenerateEvent>* writer) {
  absl::StatusOr<engine::GenerationRequest> generation =
      ToGenerationRequest(*request, config_, info_.image_tokens, RandomSeed());
  if (!generation.ok()) {
    if (observer_ != nullptr) {
      observer_->OnRequestDone(PolicyLabel(*request), generation.status(), scheduler::RequestMetrics{});
    }
    return ToGrpcStatus(generation.status());
  }

  scheduler::SubmitOptions submit;
  submit.request_id = request->request_id();
  submit.deadline = DeadlineOf(*context);
  if (request->progress_interval_ms() > 0) {
    submit.progress_interval = absl::Milliseconds(request->progress_interval_ms());
  }
  absl::StatusOr<std::shared_ptr<scheduler::RequestHandle>> handle =
      scheduler_->Submit(*generation, submit);
  if (!handle.ok()) return ToGrpcStatus(handle.status());
  scheduler::RequestHandle& h = **handle;

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
    if (auto* finished = std::get_if<scheduler::FinishedEvent>(&*event)) {
      if (!finished->status.ok()) return ToGrpcStatus(finished->status);
      if (!client_gone) writer->Write(ToProtoEvent(*event, h.id()));
      return grpc::Status::OK;
    }
    if (client_gone) continue;  // drain events until Finished
    if (!writer->Write(ToProtoEvent(*event, h.id()))) {
      client_gone = true;
      h.Cancel();
    }
  }
}

grpc::Status ArgenService::GetModelInfo(grpc::ServerContext*, const v1::GetModelInfoRequest*,
                                        v1::ModelInfo* response) {
  FillModelInfo(info_, config_, response);
  return grpc::Status::OK;
}

}  // namespace argen::server
