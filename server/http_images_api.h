// The OpenAI-compatible HTTP API on an HttpServer (docs/serving.md, "HTTP API"):
//   POST /v1/images/generations   OpenAI images API (+ argen's fields); stream: SSE
//   GET  /v1/models, /v1/models/{id}  the served model and its limits
//   GET  /health                   liveness: 200 while the process serves HTTP
//   GET  /ready                    readiness: 200 once the model is loaded, 503 while
//                                  loading and from the start of a drain
//   GET  /openapi.json             this list as an OpenAPI 3.1 document (server/openapi.h)
//   GET  /                         the playground page (server/playground.h)
// It answers from the moment it is registered (so /health and /ready work
// while the model loads); generation needs SetReady().
//
// A client that disconnects cancels its request: the handler watches the
// connection (every 20 ms) and the scheduler frees the request's KV before its
// next step. Previews (partial_images) are written as they come; one that
// arrives while the client is still reading the previous one is dropped by the
// scheduler (scheduler/preview.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/auth.h"
#include "server/http_request_mapping.h"
#include "server/http_server.h"
#include "server/request_gate.h"
#include "server/server_config.h"

namespace argen::server {

class PrometheusMetrics;

class HttpImagesApi {
 public:
  // Registers the routes on `http` (which must outlive this). `keys` null:
  // no API keys. `metrics` may be null.
  HttpImagesApi(HttpServer* http, const ServerConfig& config, const ApiKeys* keys, PrometheusMetrics* metrics);

  // The model is loaded: generation goes through `gate` from now on.
  void SetReady(RequestGate* gate);
  // A drain began: /ready answers 503, new generations 503.
  void SetDraining();
  // Waits up to `timeout` for generation handlers (streams included) to end.
  bool WaitIdle(absl::Duration timeout);

 private:
  enum class State { kLoading, kReady, kDraining };

  void Generate(const httplib::Request& request, httplib::Response& response,
                const httplib::ContentReader& content_reader);
  void Models(const httplib::Request& request, httplib::Response& response);
  void Health(const httplib::Request& request, httplib::Response& response, bool readiness);
  // The key of `request` for `right`, or false with the error response set.
  bool Authorized(const httplib::Request& request, httplib::Response& response, Right right, const ApiKey** key);
  void Fail(httplib::Response& response, const HttpApiError& error);
  State state() const;
  RequestGate* gate() const;

  const ServerConfig config_;
  const ApiKeys* const keys_;
  PrometheusMetrics* const metrics_;
  const int64_t started_unix_;
  mutable absl::Mutex mu_;
  State state_ ABSL_GUARDED_BY(mu_) = State::kLoading;
  RequestGate* gate_ ABSL_GUARDED_BY(mu_) = nullptr;
  int32_t active_ ABSL_GUARDED_BY(mu_) = 0;  // generation handlers and streams in progress
};

}  // namespace argen::server
