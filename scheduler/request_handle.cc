#include "scheduler/request_handle.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace argen::scheduler {
namespace {

// What an event holds on to while it waits: its payload plus a fixed cost.
int64_t EventBytes(const RequestEvent& event) {
  constexpr int64_t kEventOverhead = 128;
  if (const auto* image = std::get_if<ImageEvent>(&event)) {
    return kEventOverhead + static_cast<int64_t>(image->encoded.size());
  }
  if (const auto* preview = std::get_if<PreviewEvent>(&event)) {
    return kEventOverhead + static_cast<int64_t>(preview->encoded.size());
  }
  return kEventOverhead;
}

}  // namespace

RequestHandle::RequestHandle(std::string id, absl::Time deadline, int64_t max_buffered_bytes)
    : id_(std::move(id)), deadline_(deadline), max_buffered_bytes_(max_buffered_bytes) {}

std::optional<RequestEvent> RequestHandle::Next(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  if (finish_taken_) return std::nullopt;
  auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return !events_.empty(); };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (events_.empty()) return std::nullopt;
  RequestEvent event = std::move(events_.front());
  events_.pop_front();
  buffered_bytes_ -= EventBytes(event);
  if (std::holds_alternative<FinishedEvent>(event)) finish_taken_ = true;
  if (std::holds_alternative<PreviewEvent>(event)) --pending_previews_;
  return event;
}

void RequestHandle::Cancel(absl::Status reason) {
  absl::MutexLock lock(&mu_);
  if (cancelled_.load(std::memory_order_relaxed)) return;
  cancel_reason_ = std::move(reason);
  cancelled_.store(true, std::memory_order_release);
}

absl::Status RequestHandle::cancel_reason() const {
  absl::MutexLock lock(&mu_);
  return cancel_reason_;
}

int64_t RequestHandle::buffered_bytes() const {
  absl::MutexLock lock(&mu_);
  return buffered_bytes_;
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
  const bool finished = std::holds_alternative<FinishedEvent>(event);
  if (finished) finish_pushed_ = true;
  const int64_t bytes = EventBytes(event);
  if (!finished && max_buffered_bytes_ > 0 && buffered_bytes_ + bytes > max_buffered_bytes_) {
    // The reader is not keeping up: what waits is of no use any more.
    if (!cancelled_.load(std::memory_order_relaxed)) {
      cancel_reason_ = absl::ResourceExhaustedError(absl::StrCat(
          "client not reading its stream: ", buffered_bytes_ + bytes, " bytes of events would wait unsent (",
          "stream_buffer_bytes ", max_buffered_bytes_, "); request cancelled"));
      cancelled_.store(true, std::memory_order_release);
    }
    events_.clear();
    buffered_bytes_ = 0;
    pending_previews_ = 0;
    return;
  }
  buffered_bytes_ += bytes;
  if (std::holds_alternative<PreviewEvent>(event)) ++pending_previews_;
  events_.push_back(std::move(event));
}

}  // namespace argen::scheduler
