// Iteration-level continuous batching over an engine::Engine.
//
// One loop thread owns the engine's single-threaded calls. Between steps it
// ends cancelled / expired requests (freeing their KV at once), then admits
// queued requests in priority order with aging while the next one fits
// (scheduler/admission.h: its batch rows, 2 per image, fit the engine's batch
// cap beside what runs and the engine can place it now; Engine::CanAdd: the
// backend's pool is the one KV ledger, and the engine owns the limits); the
// next one is never overtaken, so large requests are not starved; running
// requests are never preempted; the prompt tokens admitted for one step are
// bounded (max_prefill_tokens), so new requests join as batch rows free, not
// in waves. Then it calls Step(); the loop waits on nothing but the engine (no
// transport, no image path). Groups that finish leave the batch and free their
// KV in the same iteration; their VQ decode (the images of all requests that
// finished, up to max_decode_batch, in one DecodeImages call), image encoding
// and delivery run on the image pipeline's threads
// (scheduler/image_pipeline.h), as do previews (scheduler/preview.h), which
// the loop only hands over (a copy of the sampled tokens) and which are
// dropped rather than queued when the image workers or the client are behind.
// Submit() is thread-safe and validates synchronously.
//
// Files: scheduler.cc (intake, drain, fatal errors, the end of every
// request), step_loop.cc (the loop thread), admission.{h,cc},
// image_pipeline.{h,cc}, request_metrics.{h,cc} (a request's figures), job.h
// (what is tracked per request).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/engine.h"
#include "scheduler/priority.h"
#include "scheduler/request_handle.h"
#include "scheduler/scheduler_observer.h"
#include "scheduler/scheduler_options.h"

namespace argen::scheduler {

// Internal to scheduler/ (job.h, admission.h, image_pipeline.h).
struct Job;
using JobPtr = std::shared_ptr<Job>;
class Admission;
class ImagePipeline;

struct SubmitOptions {
  std::string request_id;                                   // empty: a new ULID (request_id.h)
  absl::Time deadline = absl::InfiniteFuture();             // expiry ends it with DEADLINE_EXCEEDED
  absl::Duration progress_interval = absl::ZeroDuration();  // 0: the scheduler default
  Priority priority = Priority::kNormal;
  int32_t previews = 0;            // per image, 0 .. min(kMaxPreviews, token_grid - 1)
  ImageEncoder encoder;            // empty: the scheduler's encoder (images and previews)
  int64_t max_buffered_bytes = 0;  // > 0: RequestHandle's bound on events waiting to be taken
};

struct SchedulerSnapshot {
  int32_t queue_depth = 0;
  int32_t running_rows = 0;  // batch rows of the running requests (2 per image)
  int64_t kv_bytes_reserved = 0;
  int32_t active_requests = 0;  // accepted and not finished (queued, running, encoding)
  bool draining = false;
};

class Scheduler {
 public:
  // `engine` and `observer` (may be null) must outlive the scheduler.
  static absl::StatusOr<std::unique_ptr<Scheduler>> Create(engine::Engine* engine, const SchedulerOptions& options,
                                                           ImageEncoder encoder, SchedulerObserver* observer);
  // Ends whatever is left with UNAVAILABLE, then joins its threads.
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Errors: what Engine::Prepare reports (INVALID_ARGUMENT naming the field,
  // FAILED_PRECONDITION when it can never fit the engine's limits),
  // RESOURCE_EXHAUSTED when the queue is full, UNAVAILABLE while draining. On
  // success the handle's first event is Queued.
  absl::StatusOr<std::shared_ptr<RequestHandle>> Submit(const engine::GenerationRequest& request,
                                                        const SubmitOptions& options = {});

  // Refuses new requests from now on and waits up to `timeout` for accepted
  // ones (queued ones included) to finish; whatever is left then ends with
  // UNAVAILABLE. Returns true when all finished in time.
  bool Drain(absl::Duration timeout);

  SchedulerSnapshot snapshot() const;
  // The fatal device error that stopped the scheduler, or OK.
  absl::Status fatal_error() const;
  const SchedulerOptions& options() const { return options_; }

 private:
  Scheduler(engine::Engine* engine, const SchedulerOptions& options, ImageEncoder encoder, SchedulerObserver* observer);

  // Intake and the end of every request (scheduler.cc).
  // After a fatal device error: fails the queue, refuses new work, tells the owner.
  void StopAfterFatalError(const absl::Status& failed);
  // Pushes the Finished event and reports it; every accepted job ends here once.
  void Finish(Job& job, absl::Status status);
  absl::Status StopReason(const Job& job) const;

  // The step loop (step_loop.cc): the loop thread and what it alone calls.
  void Loop();
  // Pops cancelled/expired queued jobs; runs under mu_.
  void DropStopped(std::vector<JobPtr>& dropped) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds the next queued requests to the engine while they fit (never overtaken).
  void AdmitNext();
  void AddToEngine(const JobPtr& job);
  void EndCancelledRunning();
  void RunStep();
  // Removes a job's group from the engine and uncounts it.
  void ReleaseGroup(Job& job);
  // Reports KV bytes and the running batch (batch rows, requests) to the
  // observer; called after every change to running_, so no gauge outlives
  // what it counts.
  void PublishKv();

  engine::Engine* const engine_;
  const SchedulerOptions options_;
  SchedulerObserver* const observer_;
  SchedulerObserver no_observer_;

  mutable absl::Mutex mu_;
  std::deque<JobPtr> queue_ ABSL_GUARDED_BY(mu_);
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status fatal_ ABSL_GUARDED_BY(mu_);  // a fatal device error: refuse everything
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  int32_t active_requests_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t next_request_number_ ABSL_GUARDED_BY(mu_) = 0;  // submission order (priority ties)
  std::atomic<bool> abort_{false};                        // drain timed out / destructor: end everything

  // Loop-thread state (published through atomics for snapshot()).
  std::vector<JobPtr> running_;
  // What fits next, and what the admitted requests hold (admission.h).
  std::unique_ptr<Admission> admission_;
  int64_t step_index_ = 0;
  absl::Time last_step_start_ = absl::InfinitePast();
  absl::Time last_step_end_ = absl::InfinitePast();
  std::atomic<int32_t> running_batch_rows_{0};
  std::atomic<int64_t> kv_reserved_{0};

  // VQ decode, image encoding, delivery and previews, on their own threads.
  std::unique_ptr<ImagePipeline> image_pipeline_;
  std::thread loop_;
};

}  // namespace argen::scheduler
