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
  RequestHandle(std::string id, absl::Time deadline);

  const std::string& id() const { return id_; }
  absl::Time deadline() const { return deadline_; }

  // The next event, waiting up to `timeout`; nullopt on timeout or after the
  // Finished event has been taken.
  std::optional<RequestEvent> Next(absl::Duration timeout);

  // Ends the request with CANCELLED: the scheduler loop, which never idles
  // while anything runs, removes it from the queue or the running batch (its
  // KV freed) before the next engine step. Idempotent.
  void Cancel();
  bool cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  bool finished() const;
  // Preview events pushed and not yet taken by Next(): a transport that is
  // behind (a slow client) makes the scheduler drop the next preview.
  int32_t pending_previews() const;

  // Scheduler side. Events after Finished are dropped.
  void Push(RequestEvent event);

 private:
  const std::string id_;
  const absl::Time deadline_;
  std::atomic<bool> cancelled_{false};
  mutable absl::Mutex mu_;
  std::deque<RequestEvent> events_ ABSL_GUARDED_BY(mu_);
  bool finish_pushed_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_taken_ ABSL_GUARDED_BY(mu_) = false;
  int32_t pending_previews_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace argen::scheduler
