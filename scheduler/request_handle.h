// The caller's side of one submitted request: a thread-safe event queue plus
// cancellation. The scheduler pushes events; the caller pulls them.
#pragma once

#include <atomic>
#include <deque>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "scheduler/request_events.h"

namespace argen::scheduler {

class RequestHandle {
 public:
  // `max_buffered_bytes` > 0 bounds the events waiting to be taken (image
  // payloads counted by size): a Push beyond it drops what waits and cancels
  // the request with RESOURCE_EXHAUSTED, so a client that does not read
  // cannot make the server hold more than this for it.
  RequestHandle(std::string id, absl::Time deadline, int64_t max_buffered_bytes = 0);

  const std::string& id() const { return id_; }
  absl::Time deadline() const { return deadline_; }

  // The next event, waiting up to `timeout`; nullopt on timeout or after the
  // Finished event has been taken.
  std::optional<RequestEvent> Next(absl::Duration timeout);

  // Ends the request with `reason` (CANCELLED by default): the scheduler
  // loop, which never idles while anything runs, removes it from the queue or
  // the running batch (its KV freed) before the next engine step. The first
  // reason wins; later calls change nothing.
  void Cancel(absl::Status reason = absl::CancelledError("request cancelled by the client"));
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  // Why it was cancelled (OK while it is not).
  absl::Status cancel_reason() const;
  // Bytes of the events waiting to be taken.
  int64_t buffered_bytes() const;
  bool finished() const;
  // Preview events pushed and not yet taken by Next(): a transport that is
  // behind (a slow client) makes the scheduler drop the next preview.
  int32_t pending_previews() const;

  // Scheduler side. Events after Finished are dropped.
  void Push(RequestEvent event);

 private:
  const std::string id_;
  const absl::Time deadline_;
  const int64_t max_buffered_bytes_;
  std::atomic<bool> cancelled_{false};
  mutable absl::Mutex mu_;
  absl::Status cancel_reason_ ABSL_GUARDED_BY(mu_);
  std::deque<RequestEvent> events_ ABSL_GUARDED_BY(mu_);
  int64_t buffered_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool finish_pushed_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_taken_ ABSL_GUARDED_BY(mu_) = false;
  int32_t pending_previews_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace argen::scheduler
