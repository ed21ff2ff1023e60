// One request as both front ends (gRPC ArgenService, the HTTP API) see it:
// follows its events to write the per-request log line (request_log.h) when
// it ends, and puts the generation metadata into every PNG image it sends
// (engine/image/generation_metadata.h; other formats, e.g. JPEG, stay as they
// are), and reports the request to the transport metrics (transport_metrics.h:
// its end, its costs, its first preview). Not thread-safe: one transport
// thread drives it.
#pragma once

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "argen/v1/argen.pb.h"
#include "engine/engine.h"
#include "engine/image/generation_metadata.h"
#include "scheduler/request_events.h"
#include "server/request_log.h"
#include "server/transport_metrics.h"

namespace argen::server {

class RequestTrace {
 public:
  // `transport`: "grpc" or "http"; `policy_label` as the metrics name it;
  // `metrics` (may be null) outlives the trace.
  RequestTrace(std::string transport, std::string peer, const v1::GenerateRequest& request, std::string policy_label,
               TransportMetrics* metrics = nullptr);
  RequestTrace(const RequestTrace&) = delete;
  RequestTrace& operator=(const RequestTrace&) = delete;
  // A request that never ended through OnEvent(Finished) is logged here
  // (the transport went away first).
  ~RequestTrace();

  // After a successful submission: the mapped request and the served model.
  void Submitted(const std::string& request_id, const engine::GenerationRequest& generation, const std::string& model);
  // Every event, before the transport sends it: notes ids, parameters and
  // timings, tags PNG images, and logs on Finished.
  void OnEvent(scheduler::RequestEvent& event);
  // The request ended before or without a Finished event (a rejection, an
  // auth failure, a bad body): logs it now.
  void Ended(const absl::Status& status);

 private:
  void Log(const absl::Status& status);

  TransportMetrics* const metrics_;
  std::optional<scheduler::RequestMetrics> costs_;  // from its Finished event
  bool previewed_ = false;
  log::RequestRecord record_;
  image::GenerationMetadata metadata_;
  bool submitted_ = false;
  bool logged_ = false;
  const absl::Time start_ = absl::Now();
};

}  // namespace argen::server
