// The decode loop's timeline as a file (config key step_log): one line per
// engine step with its start, interval, Step() time, loop time, rows decoded
// and prefilled, prefill tokens and image tokens made (several a row with
// parallel or speculative decoding), for device runs that show the server
// keeping the batch at the cap. The loop only appends to a buffer; a writer
// thread writes it out, so a slow disk never lengthens a step. It wraps the
// observer the server already has and forwards every call to it.
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "scheduler/scheduler_observer.h"

namespace argen::server {

class StepLog final : public scheduler::SchedulerObserver {
 public:
  // Opens (truncates) `path` and writes the header line; `inner` (not null) gets every call.
  static absl::StatusOr<std::unique_ptr<StepLog>> Open(const std::string& path, scheduler::SchedulerObserver* inner);
  ~StepLog() override;  // writes what is buffered, closes the file

  static constexpr const char* kHeader =
      "step start_s interval_ms step_ms loop_ms rows_decoded rows_prefilled prefill_tokens groups_prefilled "
      "running_rows queue_depth tokens_sampled";

  void OnStep(const scheduler::StepStats& stats) override;
  void OnQueueDepth(int32_t depth) override { inner_->OnQueueDepth(depth); }
  void OnKvBytes(int64_t in_use, int64_t reserved, int64_t shared_prompts) override {
    inner_->OnKvBytes(in_use, reserved, shared_prompts);
  }
  void OnRunning(int32_t rows, int32_t requests) override { inner_->OnRunning(rows, requests); }
  void OnRequestStarted(std::string_view policy, absl::Duration queue_wait) override {
    inner_->OnRequestStarted(policy, queue_wait);
  }
  void OnImage(std::string_view policy, absl::Duration since_accepted) override {
    inner_->OnImage(policy, since_accepted);
  }
  void OnPreviewSent() override { inner_->OnPreviewSent(); }
  void OnPreviewDropped(std::string_view reason) override { inner_->OnPreviewDropped(reason); }
  void OnFirstImage(std::string_view policy, absl::Duration since_accepted) override {
    inner_->OnFirstImage(policy, since_accepted);
  }
  void OnRequestDone(std::string_view policy, const absl::Status& status,
                     const scheduler::RequestMetrics& metrics) override {
    inner_->OnRequestDone(policy, status, metrics);
  }

 private:
  StepLog(std::FILE* file, scheduler::SchedulerObserver* inner);
  void WriteLoop();

  std::FILE* const file_;
  scheduler::SchedulerObserver* const inner_;
  absl::Time origin_ = absl::InfinitePast();  // the first step's start (loop thread)
  absl::Mutex mu_;
  std::string pending_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread writer_;
};

}  // namespace argen::server
