// Hooks for process-wide metrics (Prometheus in the server, assertions in
// tests). Called from the scheduler loop, the image workers and submitting
// threads, so implementations must be thread-safe. Default: no-ops.
#pragma once

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "scheduler/request_metrics.h"

namespace argen::scheduler {

struct StepStats {
  int64_t step_index = 0;
  absl::Duration duration;  // the engine Step() call
  // The decode loop's timeline: start of the previous Step() to the start of
  // this one (0 for the first step after idling), and the part of it the loop
  // spent outside Step() (admission, bookkeeping, handing work to the image
  // workers): the loop waits on nothing else, so this stays small.
  absl::Duration interval;
  absl::Duration loop_time;
  absl::Time start;  // when this Step() began
  int32_t groups_prefilled = 0;
  int32_t rows_prefilled = 0;     // batch rows of the groups this step prefilled
  int64_t prefill_tokens = 0;     // their prompt tokens, all rows
  int32_t rows_decoded = 0;       // the engine's decode batch rows
  int32_t running_rows = 0;       // batch rows of admitted groups after this step's removals
  int32_t tokens_sampled = 0;     // image tokens this step added to its requests' progress, all images
  int64_t kv_bytes_in_use = 0;    // engine->KvBytesInUse() after removals
  int64_t kv_bytes_reserved = 0;  // sum of admitted requests' exact needs
  int32_t queue_depth = 0;
};

class SchedulerObserver {
 public:
  virtual ~SchedulerObserver() = default;
  virtual void OnStep(const StepStats& stats) {}
  virtual void OnQueueDepth(int32_t depth) {}
  // The pool's bytes in use, the admitted requests' reservation (own rows plus
  // shared prompts: equal to in_use) and of it the prompts shared across requests.
  virtual void OnKvBytes(int64_t in_use, int64_t reserved, int64_t shared_prompts) {}
  // The running batch after every change (admission, step, finish, cancel,
  // deadline, failure, drain): its batch rows (2 per image) and its requests.
  virtual void OnRunning(int32_t rows, int32_t requests) {}
  virtual void OnRequestStarted(std::string_view policy, absl::Duration queue_wait) {}
  virtual void OnImage(std::string_view policy, absl::Duration since_accepted) {}
  // A preview written to a client (called by the transports).
  virtual void OnPreviewSent() {}
  // A preview not produced or not delivered: "image_path_busy", "client_slow",
  // "late" (the final images had started), "request_ended", "failed".
  virtual void OnPreviewDropped(std::string_view reason) {}
  // A request's first image, before its OnImage.
  virtual void OnFirstImage(std::string_view policy, absl::Duration since_accepted) {}
  // Every request that reached Submit: accepted ones when they finish,
  // rejected ones at once (status says why).
  virtual void OnRequestDone(std::string_view policy, const absl::Status& status, const RequestMetrics& metrics) {}
};

}  // namespace argen::scheduler
