// What the front ends (gRPC ArgenService, the HTTP API and its server)
// report about the requests and responses they serve, labelled by transport
// ("grpc", "http"). An interface, so the transports depend on it rather than
// on Prometheus (server/prometheus_metrics.h implements it; tests may record).
// Thread-safe implementations: every transport thread calls it.
#pragma once

#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "scheduler/request_metrics.h"

namespace argen::server {

class TransportMetrics {
 public:
  virtual ~TransportMetrics() = default;
  // A Generate request that ended, however (rejected, failed, finished):
  // its final status. `metrics`: its costs when it was accepted, else null.
  virtual void OnTransportRequestDone(std::string_view transport, const absl::Status& status,
                                      const scheduler::RequestMetrics* metrics) = 0;
  // A request's first preview (partial image), `since_received` after the
  // transport read the request.
  virtual void OnFirstPreview(std::string_view transport, absl::Duration since_received) = 0;
  // One HTTP response on the API port, by its status code (200, 404, 503...).
  virtual void OnHttpResponse(int status) = 0;
};

}  // namespace argen::server
