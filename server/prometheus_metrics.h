// Prometheus metrics of the server (names and meanings: docs/serving.md),
// fed by the scheduler's observer hooks, served on their own HTTP port.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "prometheus/counter.h"
#include "prometheus/family.h"
#include "prometheus/gauge.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"
#include "scheduler/scheduler_observer.h"
#include "server/http_server.h"
#include "server/process_metrics.h"
#include "server/transport_metrics.h"

namespace argen::server {

// What argen_build_info{version, backend, model} says.
struct BuildInfo {
  std::string version;  // argen::Version()
  std::string backend;  // engine::ModelInfo::backend
  std::string model;    // engine::ModelInfo::name
};

class PrometheusMetrics : public scheduler::SchedulerObserver, public TransportMetrics {
 public:
  explicit PrometheusMetrics(int64_t kv_budget_bytes);
  // The engine's KV budget once it is loaded (argen_kv_cache_budget_bytes).
  void SetKvBudget(int64_t kv_budget_bytes);

  // argen_build_info{version, backend, model} 1, once the model is loaded;
  // from then on the per-transport series carry model="<its name>".
  void SetBuildInfo(const BuildInfo& build);

  const std::shared_ptr<prometheus::Registry>& registry() const { return registry_; }

  void OnStep(const scheduler::StepStats& stats) override;
  void OnQueueDepth(int32_t depth) override;
  void OnKvBytes(int64_t in_use, int64_t reserved, int64_t shared_prompts) override;
  void OnRunning(int32_t rows, int32_t requests) override;
  void OnRequestStarted(std::string_view policy, absl::Duration queue_wait) override;
  void OnFirstImage(std::string_view policy, absl::Duration since_accepted) override;
  void OnImage(std::string_view policy, absl::Duration since_accepted) override;
  void OnRequestDone(std::string_view policy, const absl::Status& status,
                     const scheduler::RequestMetrics& metrics) override;
  void OnPreviewSent() override;
  void OnPreviewDropped(std::string_view reason) override;
  // An API key check that failed (UNAUTHENTICATED or PERMISSION_DENIED).
  void OnAuthFailure(absl::StatusCode code);
  void SetDraining(bool draining);
  // A Generate stream reset because its client accepted no event for
  // stream_stall_timeout_s (its request may have finished meanwhile).
  void OnStreamStalled();

  // TransportMetrics: series labelled {model, transport} (and HTTP's by code).
  void OnTransportRequestDone(std::string_view transport, const absl::Status& status,
                              const scheduler::RequestMetrics* metrics) override;
  void OnFirstPreview(std::string_view transport, absl::Duration since_received) override;
  void OnHttpResponse(int status) override;

  // Refreshes what is read at scrape time (process_* from /proc).
  void BeforeScrape();

 private:
  prometheus::Histogram& ByPolicy(prometheus::Family<prometheus::Histogram>& family, std::string_view policy);
  // {model, transport} labels; the model is "" until SetBuildInfo.
  std::map<std::string, std::string> TransportLabels(std::string_view transport) const;

  std::shared_ptr<prometheus::Registry> registry_;
  double kv_budget_bytes_;  // SetKvBudget runs before the scheduler starts
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& queue_wait_;
  prometheus::Family<prometheus::Histogram>& first_image_;
  prometheus::Family<prometheus::Histogram>& image_latency_;
  prometheus::Family<prometheus::Histogram>& request_latency_;
  prometheus::Histogram& step_time_;
  prometheus::Histogram& step_rows_;
  prometheus::Histogram& loop_time_;
  prometheus::Counter& prefill_tokens_;
  prometheus::Counter& tokens_;
  prometheus::Counter& images_;
  prometheus::Gauge& running_requests_;
  prometheus::Gauge& running_rows_;
  prometheus::Gauge& queue_depth_;
  prometheus::Gauge& kv_used_;
  prometheus::Gauge& kv_reserved_;
  prometheus::Gauge& kv_shared_prompts_;
  prometheus::Gauge& kv_budget_;
  prometheus::Gauge& kv_usage_ratio_;
  prometheus::Gauge& draining_;
  prometheus::Counter& previews_sent_;
  prometheus::Family<prometheus::Counter>& previews_dropped_;
  prometheus::Family<prometheus::Counter>& auth_failures_;
  prometheus::Family<prometheus::Gauge>& build_info_;
  ProcessMetrics process_;
  prometheus::Counter& streams_stalled_;
  // Per transport and model.
  mutable absl::Mutex model_mu_;
  std::string model_ ABSL_GUARDED_BY(model_mu_);
  prometheus::Family<prometheus::Counter>& transport_requests_;
  prometheus::Family<prometheus::Histogram>& prefill_seconds_;
  prometheus::Family<prometheus::Histogram>& vq_decode_seconds_;
  prometheus::Family<prometheus::Histogram>& prompt_tokens_;
  prometheus::Family<prometheus::Histogram>& first_preview_;
  prometheus::Family<prometheus::Counter>& http_responses_;
};

// The /metrics HTTP endpoint: the registry in the Prometheus text format on
// its own HttpServer (cpp-httplib; not prometheus-cpp's civetweb Exposer,
// whose small fixed-stack threads cannot start once cuBLAS is loaded). port 0
// picks a free port; the endpoint stops when destroyed. `before_scrape`
// (optional) runs before each rendering (process metrics).
class MetricsEndpoint {
 public:
  // `authorize` (may be empty: open) checks the request's authorization
  // header; its error (UNAUTHENTICATED / PERMISSION_DENIED) becomes 401 / 403.
  // `reuse_port`: SO_REUSEPORT (allow_port_sharing).
  using Authorize = std::function<absl::Status(absl::string_view authorization)>;
  static absl::StatusOr<std::unique_ptr<MetricsEndpoint>> Start(const std::string& address, int32_t port,
                                                                std::shared_ptr<prometheus::Registry> registry,
                                                                Authorize authorize = nullptr,
                                                                std::function<void()> before_scrape = nullptr,
                                                                bool reuse_port = false);
  int32_t port() const { return http_->port(); }

 private:
  explicit MetricsEndpoint(std::unique_ptr<HttpServer> http) : http_(std::move(http)) {}
  std::unique_ptr<HttpServer> http_;
};

}  // namespace argen::server
