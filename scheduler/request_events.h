// Events a request produces, in order: Queued, Started, Progress* and
// Preview* (interleaved; every Preview before the first Image), Image*,
// Finished (always last, exactly once).
#pragma once

#include <cstdint>
#include <string>
#include <variant>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "engine/sparse/policy_params.h"
#include "scheduler/request_metrics.h"

namespace argen::scheduler {

struct QueuedEvent {
  int32_t position = 0;  // requests ahead of it in the queue
  int64_t kv_bytes = 0;  // the most its admission takes (PreparedRequest::kv_bytes)
  int32_t rows = 0;      // its batch rows (2 per image: cond + uncond)
  uint64_t seed = 0;
  sparse::ResolvedPolicy policy;
  int32_t prompt_tokens = 0;  // of the conditional row
};

struct StartedEvent {
  absl::Duration queue_wait;
  int32_t batch_rows = 0;  // batch rows admitted including this request
};

struct ProgressEvent {
  int32_t tokens_done = 0;
  int32_t tokens_total = 0;
};

struct ImageEvent {
  int32_t index = 0;
  uint64_t seed = 0;
  int32_t width = 0, height = 0;
  std::string encoded;  // PNG bytes in the server
};

// One intermediate image (scheduler/preview.h says what it shows).
struct PreviewEvent {
  int32_t index = 0;        // 0 .. previews-1, in order
  int32_t image = 0;        // which image of the request
  int32_t rows_done = 0;    // complete token rows shown
  int32_t tokens_done = 0;  // rows_done x token_grid
  int32_t width = 0, height = 0;
  std::string encoded;  // encoded like the final images
};

struct FinishedEvent {
  absl::Status status;     // OK, or why it ended (cancelled, deadline, engine error, drain)
  RequestMetrics metrics;  // meaningful fields only for what ran
};

using RequestEvent = std::variant<QueuedEvent, StartedEvent, ProgressEvent, ImageEvent, FinishedEvent, PreviewEvent>;

}  // namespace argen::scheduler
