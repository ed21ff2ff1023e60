// Iteration-level continuous batching over an engine::Engine.
//
// One loop thread owns the engine's single-threaded calls. Between steps it
// ends cancelled / expired requests (freeing their KV at once), then admits
// queued requests in priority order with aging (scheduler/priority.h) while
// the next one's rows fit the engine's batch cap beside what runs and the
// engine can place it now (Engine::CanAdd: the backend's pool is the one KV
// ledger, and the engine owns the limits); the next one is never overtaken, so
// large requests are not starved; running requests are never preempted; the
// prompt tokens admitted for one step are bounded (max_prefill_tokens), so
// new requests join as rows free, not in waves. Then it calls Step(); the
// loop waits on nothing but the engine (no transport, no image path). Groups that finish leave the batch and
// free their KV in the same iteration; their VQ decode (the images of all
// requests that finished, up to max_decode_batch, in one DecodeImages call)
// and image encoding run on TaskWorkers threads, as do previews
// (scheduler/preview.h), which the loop
// only hands over (a copy of the sampled tokens) and which are dropped rather
// than queued when the image workers or the client are behind. Submit() is
// thread-safe and validates synchronously.
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
#include "scheduler/task_workers.h"

namespace argen::scheduler {

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
  int32_t running_rows = 0;
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
  struct Job;
  using JobPtr = std::shared_ptr<Job>;

  Scheduler(engine::Engine* engine, const SchedulerOptions& options, ImageEncoder encoder, SchedulerObserver* observer);

  void Loop();
  // Pops cancelled/expired queued jobs; runs under mu_.
  void DropStopped(std::vector<JobPtr>& dropped) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Adds the next queued requests to the engine while they fit (never overtaken).
  void AdmitNext();
  void AddToEngine(const JobPtr& job);
  void EndCancelledRunning();
  void RunStep();
  // After a fatal device error: fails the queue, refuses new work, tells the owner.
  void StopAfterFatalError(const absl::Status& failed);
  void ReleaseGroup(Job& job);
  // On an image worker: takes the queued finished jobs (up to
  // max_decode_batch images, at least one job), decodes their images in one
  // DecodeImages call and posts each job's encoding.
  void DecodeQueued();
  // On an image worker: encodes a job's decoded images, streams them in order, finishes it.
  void EncodeAndDeliver(const JobPtr& job, std::vector<engine::RgbImage> rgb, absl::Duration decode_time);
  // Hands the next due preview of each running job to the image workers, or drops it.
  void OfferPreviews();
  void DecodePreview(const JobPtr& job, int32_t index, int32_t rows, std::vector<std::vector<int32_t>> sampled);
  // Index into queue_ of the request to admit next (the queue is not empty).
  size_t NextInQueue(absl::Time now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Pushes the Finished event and reports it; every accepted job ends here once.
  void Finish(Job& job, absl::Status status);
  absl::Status StopReason(const Job& job) const;
  // Reports KV bytes and the running batch (rows, requests) to the observer;
  // called after every change to running_, so no gauge outlives what it counts.
  void PublishKv();

  engine::Engine* const engine_;
  const SchedulerOptions options_;
  const ImageEncoder encoder_;
  SchedulerObserver* const observer_;
  SchedulerObserver no_observer_;
  const int32_t max_batch_rows_;  // the engine's batch cap

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
  // Sums of the admitted requests' rows and own KV (PreparedRequest::own_kv_bytes);
  // KvReserved() adds the prompts they share and equals the engine's
  // KvBytesInUse: admission places exactly what it reserves.
  int32_t rows_in_use_ = 0;
  int64_t kv_in_use_ = 0;
  int64_t KvReserved() const { return kv_in_use_ + engine_->SharedKvBytes(); }
  int64_t step_index_ = 0;
  // Admitted since the last Step(): what that step prefills.
  int32_t rows_admitted_ = 0;
  int64_t tokens_admitted_ = 0;
  absl::Time last_step_start_ = absl::InfinitePast();
  absl::Time last_step_end_ = absl::InfinitePast();
  std::atomic<int32_t> running_rows_{0};
  std::atomic<int64_t> kv_reserved_{0};

  // Finished jobs waiting for their VQ decode, in finishing order.
  absl::Mutex decode_mu_;
  std::deque<JobPtr> decode_queue_ ABSL_GUARDED_BY(decode_mu_);
  std::unique_ptr<TaskWorkers> image_workers_;
  std::thread loop_;
};

}  // namespace argen::scheduler
