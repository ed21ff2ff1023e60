#include "server/request_trace.h"

#include <variant>

#include "absl/time/clock.h"
#include "engine/sparse/policy_params.h"

namespace argen::server {
namespace {

nlohmann::ordered_json RequestedParams(const v1::SparsityPolicy& p) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  if (p.has_sparsity()) j["sparsity"] = p.sparsity();
  if (p.has_n_att()) j["n_att"] = p.n_att();
  if (p.has_n_recent()) j["n_recent"] = p.n_recent();
  if (p.has_n_sink()) j["n_sink"] = p.n_sink();
  if (!p.kv_cache_dtype().empty()) j["kv_cache_dtype"] = p.kv_cache_dtype();
  return j;
}

}  // namespace

RequestTrace::RequestTrace(std::string transport, std::string peer, const v1::GenerateRequest& request,
                           std::string policy_label, TransportMetrics* metrics)
    : metrics_(metrics) {
  record_.transport = std::move(transport);
  record_.request_id = request.request_id();
  record_.peer = std::move(peer);
  record_.policy = std::move(policy_label);
  record_.policy_params = RequestedParams(request.policy());
  record_.images_requested = request.num_images() == 0 ? 1 : request.num_images();
}

RequestTrace::~RequestTrace() {
  if (!logged_) Log(absl::CancelledError("the transport ended before the request finished"));
}

void RequestTrace::Submitted(const std::string& request_id, const engine::GenerationRequest& generation,
                             const std::string& model) {
  submitted_ = true;
  record_.request_id = request_id;
  record_.seed = generation.sampling.seed;
  record_.has_seed = true;
  metadata_.prompt = generation.prompt;
  metadata_.negative_prompt = generation.negative_prompt;
  metadata_.class_id = generation.class_id;
  metadata_.seed = generation.sampling.seed;
  metadata_.sampling = generation.sampling;
  metadata_.sparsity = generation.policy.sparsity;
  metadata_.model = model;
}

void RequestTrace::OnEvent(scheduler::RequestEvent& event) {
  if (auto* queued = std::get_if<scheduler::QueuedEvent>(&event)) {
    metadata_.policy = queued->policy;
    record_.policy_params = {{"sparsity", metadata_.sparsity},
                             {"n_att", queued->policy.n_att},
                             {"n_slots", queued->policy.n_slots},
                             {"n_recent", queued->policy.n_recent},
                             {"n_sink", queued->policy.n_sink},
                             {"kv_cache_dtype", std::string(sparse::KvFormatName(queued->policy.kv_format))}};
  } else if (auto* img = std::get_if<scheduler::ImageEvent>(&event)) {
    ++record_.images_sent;
    // Only PNGs take text chunks; JPEG (HTTP output_format) and raw test
    // payloads stay as they are.
    if (submitted_) {
      if (absl::StatusOr<std::string> tagged = image::AddGenerationMetadata(img->encoded, metadata_, img->index);
          tagged.ok()) {
        img->encoded = *std::move(tagged);
      }
    }
  } else if (std::holds_alternative<scheduler::PreviewEvent>(event)) {
    if (!previewed_ && metrics_ != nullptr) metrics_->OnFirstPreview(record_.transport, absl::Now() - start_);
    previewed_ = true;
  } else if (auto* finished = std::get_if<scheduler::FinishedEvent>(&event)) {
    costs_ = finished->metrics;
    record_.queue_wait_seconds = absl::ToDoubleSeconds(finished->metrics.queue_wait);
    record_.total_seconds = absl::ToDoubleSeconds(finished->metrics.total);
    Log(finished->status);
  }
}

void RequestTrace::Ended(const absl::Status& status) { Log(status); }

void RequestTrace::Log(const absl::Status& status) {
  if (logged_) return;
  logged_ = true;
  record_.status = status;
  if (record_.total_seconds == 0) record_.total_seconds = absl::ToDoubleSeconds(absl::Now() - start_);
  log::LogRequest(record_);
  if (metrics_ != nullptr) metrics_->OnTransportRequestDone(record_.transport, status, costs_ ? &*costs_ : nullptr);
}

}  // namespace argen::server
