// Helpers shared by the scheduler tests.
#pragma once

#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "engine/engine.h"
#include "scheduler/request_handle.h"
#include "scheduler/scheduler_observer.h"

namespace argen::scheduler::testing {

// Reads events until Finished (or `timeout` without one); the Finished event
// is last in the result when it arrived.
std::vector<RequestEvent> CollectEvents(RequestHandle& handle, absl::Duration timeout = absl::Seconds(30));
const FinishedEvent* FindFinished(const std::vector<RequestEvent>& events);

// An encoder that passes the RGB bytes through, so tests can check pixels.
absl::StatusOr<std::string> RawEncoder(const engine::RgbImage& image);

engine::GenerationRequest MakeRequest(const std::string& prompt, int num_images = 1, uint64_t seed = 7);

// Records what the scheduler reports, for assertions.
class RecordingObserver : public SchedulerObserver {
 public:
  void OnStep(const StepStats& stats) override;
  void OnRequestDone(std::string_view policy, const absl::Status& status, const RequestMetrics& metrics) override;
  std::vector<StepStats> steps() const;
  std::vector<absl::StatusCode> done_codes() const;
  // Called on the loop thread after each step is recorded.
  std::function<void(const StepStats&)> on_step;

 private:
  mutable absl::Mutex mu_;
  std::vector<StepStats> steps_;
  std::vector<absl::StatusCode> done_;
};

}  // namespace argen::scheduler::testing
