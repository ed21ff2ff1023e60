// One running argen server: engine, scheduler, gRPC service (with health
// checking and reflection), the OpenAI-compatible HTTP API (when http_port is
// set) and the Prometheus endpoint, wired from a ServerConfig; TLS and API
// keys from the config apply to gRPC and HTTP alike. main() and the
// in-process tests both use it.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "engine/engine.h"
#include "grpcpp/server.h"
#include "scheduler/scheduler.h"
#include "server/argen_service.h"
#include "server/auth.h"
#include "server/http_images_api.h"
#include "server/http_server.h"
#include "server/prometheus_metrics.h"
#include "server/request_gate.h"
#include "server/server_config.h"
#include "server/step_log.h"
#include "server/tls_config.h"

namespace argen::server {

class ArgenServer {
 public:
  // `engine` null: created from the config (model_dir, backend, vq_backend, threads,
  // kv_budget_bytes, max_batch_rows). `encoder` null: PNG.
  static absl::StatusOr<std::unique_ptr<ArgenServer>> Start(const ServerConfig& config,
                                                            std::unique_ptr<engine::Engine> engine = nullptr,
                                                            scheduler::ImageEncoder encoder = nullptr);
  ~ArgenServer();

  int32_t port() const { return port_; }
  int32_t metrics_port() const { return metrics_ ? metrics_->port() : -1; }
  int32_t http_port() const { return http_ ? http_->port() : -1; }
  bool tls() const { return tls_ != nullptr; }
  engine::Engine& engine() { return *engine_; }
  scheduler::Scheduler& scheduler() { return *scheduler_; }

  // Graceful stop: health NOT_SERVING and /ready 503, new requests
  // UNAVAILABLE (HTTP 503), accepted ones finish (up to drain_timeout_s, then
  // UNAVAILABLE), HTTP and gRPC stop.
  // Returns true when everything finished within the timeout. Idempotent.
  bool Shutdown();

  // A fatal device error (engine/device_errors.h) makes health NOT_SERVING,
  // fails and refuses all requests, then calls `handler` (on the scheduler's
  // thread; main() stops the process with exit code 3). Before a handler is
  // set the error is only recorded.
  void SetFatalErrorHandler(std::function<void(const absl::Status&)> handler);
  // The fatal device error, or OK.
  absl::Status fatal_error() const;

 private:
  ArgenServer() = default;

  ServerConfig config_;
  std::unique_ptr<TlsMaterial> tls_;
  std::unique_ptr<ApiKeys> keys_;
  std::unique_ptr<engine::Engine> engine_;
  std::unique_ptr<PrometheusMetrics> prometheus_;
  std::unique_ptr<StepLog> step_log_;  // config step_log; wraps prometheus_ for the scheduler
  std::unique_ptr<scheduler::Scheduler> scheduler_;
  std::unique_ptr<RequestGate> gate_;
  std::unique_ptr<ArgenService> service_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<HttpImagesApi> http_api_;
  std::unique_ptr<grpc::Server> grpc_;
  std::unique_ptr<MetricsEndpoint> metrics_;
  int32_t port_ = 0;
  void OnFatalError(const absl::Status& status);

  mutable absl::Mutex fatal_mu_;
  absl::Status fatal_ ABSL_GUARDED_BY(fatal_mu_);
  std::function<void(const absl::Status&)> fatal_handler_ ABSL_GUARDED_BY(fatal_mu_);
  absl::Mutex shutdown_mu_;
  bool shut_down_ = false;
  bool drained_in_time_ = true;
};

}  // namespace argen::server
