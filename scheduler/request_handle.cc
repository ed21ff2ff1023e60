#include "scheduler/request_handle.h"

#include <utility>

namespace argen::scheduler {

RequestHandle::RequestHandle(std::string id, absl::Time deadline)
    : id_(std::move(id)), deadline_(deadline) {}

std::optional<RequestEvent> RequestHandle::Next(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  if (finish_taken_) return std::nullopt;
  auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !events_.empty(); };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (events_.empty()) return std::nullopt;
  RequestEvent event = std::move(events_.front());
  events_.pop_front();
  if (std::holds_alternative<FinishedEvent>(event)) finish_taken_ = true;
  if (std::holds_alternative<PreviewEvent>(event)) --pending_previews_;
  return event;
}

void RequestHandle::Cancel() {
  cancelled_.store(true, std::memory_order_release);
}

bool RequestHandle::finished() const {
  absl::MutexLock lock(&mu_);
  return finish_pushed_;
}

int32_t RequestHandle::pending_previews() const {
  absl::MutexLock lock(&mu_);
  return pending_previews_;
}

void RequestHandle::Push(RequestEvent event) {
  absl::MutexLock lock(&mu_);
  if (finish_pushed_) return;
  if (std::holds_alternative<FinishedEvent>(event)) finish_pushed_ = true;
  if (std::holds_alternative<PreviewEvent>(event)) ++pending_previews_;
  events_.push_back(std::move(event));
}

}  // namespace argen::scheduler
