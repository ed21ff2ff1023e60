#include "server/stream_watchdog.h"

#include <algorithm>

#include "absl/time/clock.h"

namespace argen::server {

StreamWatchdog::StreamWatchdog(absl::Duration stall_timeout)
    : stall_timeout_(stall_timeout), thread_([this] { Loop(); }) {}

StreamWatchdog::~StreamWatchdog() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  thread_.join();
}

bool StreamWatchdog::Write(grpc::ServerContext* context, const std::function<bool()>& write, bool* stalled) {
  std::list<PendingWrite>::iterator it;
  {
    absl::MutexLock lock(&mu_);
    it = pending_.insert(pending_.end(), PendingWrite{context, absl::Now()});
  }
  const bool ok = write();
  absl::MutexLock lock(&mu_);
  *stalled = it->stalled;
  pending_.erase(it);  // before returning: the context must outlive its entry
  return ok;
}

void StreamWatchdog::Loop() {
  // Checks a few times per timeout; a stall is caught within ~1.25x the timeout.
  const absl::Duration period = std::clamp(stall_timeout_ / 4, absl::Milliseconds(10), absl::Milliseconds(250));
  absl::MutexLock lock(&mu_);
  auto stopping = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_; };
  while (!mu_.AwaitWithTimeout(absl::Condition(&stopping), period)) {
    const absl::Time now = absl::Now();
    for (PendingWrite& w : pending_) {
      if (w.stalled || now - w.started < stall_timeout_) continue;
      w.stalled = true;
      w.context->TryCancel();
    }
  }
}

}  // namespace argen::server
