#include "scheduler/tests/scheduler_test_util.h"

#include <variant>

namespace argen::scheduler::testing {

std::vector<RequestEvent> CollectEvents(RequestHandle& handle, absl::Duration timeout) {
  std::vector<RequestEvent> events;
  const absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    std::optional<RequestEvent> e = handle.Next(absl::Milliseconds(50));
    if (!e) continue;
    const bool last = std::holds_alternative<FinishedEvent>(*e);
    events.push_back(std::move(*e));
    if (last) break;
  }
  return events;
}

const FinishedEvent* FindFinished(const std::vector<RequestEvent>& events) {
  if (events.empty()) return nullptr;
  return std::get_if<FinishedEvent>(&events.back());
}

absl::StatusOr<std::string> RawEncoder(const engine::RgbImage& image) {
  return std::string(image.rgb.begin(), image.rgb.end());
}

engine::GenerationRequest MakeRequest(const std::string& prompt, int num_images, uint64_t seed) {
  engine::GenerationRequest r;
  r.prompt = prompt;
  r.num_images = num_images;
  r.sampling.seed = seed;
  return r;
}

void RecordingObserver::OnStep(const StepStats& stats) {
  {
    absl::MutexLock lock(&mu_);
    steps_.push_back(stats);
  }
  if (on_step) on_step(stats);
}

void RecordingObserver::OnRequestDone(std::string_view, const absl::Status& status, const RequestMetrics&) {
  absl::MutexLock lock(&mu_);
  done_.push_back(status.code());
}

std::vector<StepStats> RecordingObserver::steps() const {
  absl::MutexLock lock(&mu_);
  return steps_;
}

std::vector<absl::StatusCode> RecordingObserver::done_codes() const {
  absl::MutexLock lock(&mu_);
  return done_;
}

}  // namespace argen::scheduler::testing
