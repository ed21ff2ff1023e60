#include "server/request_gate.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "engine/sparse/policy_params.h"
#include "server/prometheus_metrics.h"
#include "server/prompt_limits.h"
#include "server/request_mapping.h"

namespace argen::server {

absl::StatusOr<scheduler::Priority> ResolvePriority(v1::Priority requested, const ApiKey* key) {
  const scheduler::Priority cap = key != nullptr ? key->max_priority : scheduler::Priority::kHigh;
  scheduler::Priority p;
  switch (requested) {
    case v1::PRIORITY_UNSPECIFIED:
      return std::min(scheduler::Priority::kNormal, cap);
    case v1::PRIORITY_LOW:
      p = scheduler::Priority::kLow;
      break;
    case v1::PRIORITY_NORMAL:
      p = scheduler::Priority::kNormal;
      break;
    case v1::PRIORITY_HIGH:
      p = scheduler::Priority::kHigh;
      break;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("priority: unknown value ", static_cast<int>(requested), " (low, normal, high)"));
  }
  if (p > cap) {
    return absl::PermissionDeniedError(absl::StrCat("priority: API key '", key->name, "' may ask for at most ",
                                                    scheduler::PriorityName(cap), ", not ",
                                                    scheduler::PriorityName(p)));
  }
  return p;
}

RequestGate::RequestGate(scheduler::Scheduler* scheduler, const engine::ModelInfo& info, const ServerConfig& config,
                         const ApiKeys* keys, PrometheusMetrics* metrics)
    : scheduler_(scheduler),
      info_(info),
      config_(config),
      keys_(keys),
      metrics_(metrics),
      max_prompt_bytes_(PromptByteLimit(config.max_prompt_bytes, info.max_prompt_tokens, config.max_message_bytes)),
      seed_rng_(std::random_device{}()) {}

std::string RequestGate::PolicyLabel(const v1::GenerateRequest& request) const {
  if (request.policy().name().empty()) return std::string(sparse::PolicyName(config_.default_policy.kind));
  absl::StatusOr<sparse::PolicyKind> kind = sparse::ParsePolicyName(request.policy().name());
  return kind.ok() ? std::string(sparse::PolicyName(*kind)) : "invalid";
}

uint64_t RequestGate::RandomSeed() {
  absl::MutexLock lock(&seed_mu_);
  return seed_rng_() >> 11;  // 53 bits: exact in JSON/doubles for clients that print it
}

absl::StatusOr<const ApiKey*> RequestGate::Authorize(absl::string_view authorization, Right right) {
  absl::StatusOr<const ApiKey*> key = server::Authorize(keys_, authorization, right);
  if (!key.ok() && metrics_ != nullptr) metrics_->OnAuthFailure(key.status().code());
  return key;
}

absl::StatusOr<Submission> RequestGate::Submit(const ApiKey* key, const v1::GenerateRequest& request,
                                               absl::Time deadline, scheduler::ImageEncoder encoder) {
  auto reject = [&](absl::Status status) {
    if (metrics_ != nullptr) metrics_->OnRequestDone(PolicyLabel(request), status, scheduler::RequestMetrics{});
    return status;
  };
  // The byte bound first: nothing below (tokenizing) may cost more than a
  // small multiple of what the request sent.
  if (absl::Status s = CheckPromptBytes(request.prompt(), max_prompt_bytes_); !s.ok()) return reject(s);
  if (absl::Status s = CheckPromptBytes(request.negative_prompt(), max_prompt_bytes_, "negative_prompt"); !s.ok()) {
    return reject(s);
  }
  absl::StatusOr<engine::GenerationRequest> generation = ToGenerationRequest(request, config_, info_, RandomSeed());
  if (!generation.ok()) return reject(generation.status());
  if (request.previews() < 0) {
    return reject(absl::InvalidArgumentError(absl::StrCat("previews: must be >= 0, got ", request.previews())));
  }
  absl::StatusOr<scheduler::Priority> priority = ResolvePriority(request.priority(), key);
  if (!priority.ok()) {
    if (metrics_ != nullptr && priority.status().code() == absl::StatusCode::kPermissionDenied) {
      metrics_->OnAuthFailure(priority.status().code());
    }
    return reject(priority.status());
  }
  absl::StatusOr<KeyLease> lease = limiter_.Acquire(key, generation->num_images);
  if (!lease.ok()) return reject(lease.status());

  scheduler::SubmitOptions submit;
  submit.request_id = request.request_id();
  submit.deadline = deadline;
  submit.max_buffered_bytes = config_.stream_buffer_bytes;  // a client that does not read
  if (request.progress_interval_ms() > 0) {
    submit.progress_interval = absl::Milliseconds(request.progress_interval_ms());
  }
  submit.priority = *priority;
  submit.previews = request.previews();
  submit.encoder = std::move(encoder);
  // The scheduler counts its own rejections.
  absl::StatusOr<std::shared_ptr<scheduler::RequestHandle>> handle = scheduler_->Submit(*generation, submit);
  if (!handle.ok()) return handle.status();
  return Submission{*std::move(handle), *std::move(lease), *std::move(generation)};
}

}  // namespace argen::server
