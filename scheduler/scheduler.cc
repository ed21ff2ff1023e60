// The scheduler's intake (Submit), drain, fatal errors and the end of every
// request; the loop thread is step_loop.cc.
#include "scheduler/scheduler.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/request_rules.h"
#include "engine/sparse/policy_params.h"
#include "scheduler/admission.h"
#include "scheduler/image_pipeline.h"
#include "scheduler/job.h"
#include "scheduler/preview.h"
#include "scheduler/request_id.h"
#include "scheduler/request_metrics.h"

namespace argen::scheduler {

absl::StatusOr<std::unique_ptr<Scheduler>> Scheduler::Create(engine::Engine* engine, const SchedulerOptions& options,
                                                             ImageEncoder encoder, SchedulerObserver* observer) {
  if (engine == nullptr) return absl::InvalidArgumentError("scheduler: engine is null");
  if (engine->info().kv_budget_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("scheduler: the engine's kv_budget_bytes must be > 0, got ", engine->info().kv_budget_bytes));
  }
  if (engine->info().max_batch_rows < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("scheduler: the engine's max_batch_rows must be >= 2, got ", engine->info().max_batch_rows));
  }
  if (options.queue_limit < 1) {
    return absl::InvalidArgumentError(absl::StrCat("scheduler: queue_limit must be >= 1, got ", options.queue_limit));
  }
  if (options.image_workers < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("scheduler: image_workers must be >= 1, got ", options.image_workers));
  }
  if (!encoder) return absl::InvalidArgumentError("scheduler: image encoder is missing");
  if (options.priority_aging <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("scheduler: priority_aging must be > 0");
  }
  if (options.max_prefill_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("scheduler: max_prefill_tokens must be >= 0, got ", options.max_prefill_tokens));
  }
  if (options.max_decode_batch < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("scheduler: max_decode_batch must be >= 1, got ", options.max_decode_batch));
  }
  return std::unique_ptr<Scheduler>(new Scheduler(engine, options, std::move(encoder), observer));
}

Scheduler::Scheduler(engine::Engine* engine, const SchedulerOptions& options, ImageEncoder encoder,
                     SchedulerObserver* observer)
    : engine_(engine),
      options_(options),
      observer_(observer != nullptr ? observer : &no_observer_),
      admission_(std::make_unique<Admission>(engine, engine->info().max_batch_rows, options.max_prefill_tokens,
                                             options.priority_aging)),
      image_pipeline_(std::make_unique<ImagePipeline>(
          engine, options, std::move(encoder), observer_,
          ImagePipeline::RequestEnds{[this](const Job& job) { return StopReason(job); },
                                     [this](Job& job, absl::Status status) { Finish(job, std::move(status)); }})) {
  observer_->OnKvBytes(0, 0, 0);
  observer_->OnQueueDepth(0);
  loop_ = std::thread([this] { Loop(); });
}

Scheduler::~Scheduler() {
  Drain(absl::ZeroDuration());
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  loop_.join();
  image_pipeline_.reset();  // runs what is queued (each ends at once under abort_)
}

absl::StatusOr<std::shared_ptr<RequestHandle>> Scheduler::Submit(const engine::GenerationRequest& request,
                                                                 const SubmitOptions& submit) {
  const std::string requested_policy(sparse::PolicyName(request.policy.kind));
  auto reject = [&](absl::Status status) {
    observer_->OnRequestDone(requested_policy, status, RequestMetrics{});
    return status;
  };
  {
    absl::MutexLock lock(&mu_);
    if (!fatal_.ok()) {
      return reject(
          absl::UnavailableError(absl::StrCat("server is stopping after a device error: ", fatal_.message())));
    }
    if (draining_) {
      return reject(absl::UnavailableError("server is draining: not accepting new requests"));
    }
  }
  absl::StatusOr<engine::PreparedRequest> prepared = engine_->Prepare(request);
  if (!prepared.ok()) return reject(prepared.status());
  // The request's image size (resolved by Prepare): its token rows bound the previews.
  const int32_t token_grid = TokenRows(prepared->layout);
  const int32_t max_previews = MaxPreviews(prepared->layout);
  if (submit.previews < 0 || submit.previews > max_previews) {
    return reject(
        absl::InvalidArgumentError(absl::StrCat("previews: must be in [0, ", max_previews, "] for this model (",
                                                token_grid, " token rows), got ", submit.previews)));
  }

  auto job = std::make_shared<Job>();
  job->policy_name = std::string(sparse::PolicyName(prepared->policy.kind));
  job->batch_rows = BatchRowsOf(prepared->request.num_images);
  job->prompt_tokens = static_cast<int64_t>(job->batch_rows) * static_cast<int64_t>(prepared->cond_ids.size());
  job->request = engine::MakeRequest(*std::move(prepared));
  job->progress_interval =
      submit.progress_interval > absl::ZeroDuration() ? submit.progress_interval : options_.progress_interval;
  job->priority = submit.priority;
  job->encoder = submit.encoder;
  job->preview_token_rows = PreviewRows(submit.previews, token_grid);

  QueuedEvent queued;
  {
    absl::MutexLock lock(&mu_);
    if (!fatal_.ok()) {
      return reject(
          absl::UnavailableError(absl::StrCat("server is stopping after a device error: ", fatal_.message())));
    }
    if (draining_) {
      return reject(absl::UnavailableError("server is draining: not accepting new requests"));
    }
    if (static_cast<int32_t>(queue_.size()) >= options_.queue_limit) {
      return reject(absl::ResourceExhaustedError(absl::StrCat(
          "queue full: ", queue_.size(), " requests waiting (queue_limit ", options_.queue_limit, "); retry later")));
    }
    std::string id = submit.request_id.empty() ? NewRequestId() : submit.request_id;
    job->sequence = next_request_number_++;
    job->handle = std::make_shared<RequestHandle>(std::move(id), submit.deadline, submit.max_buffered_bytes);
    job->accepted = absl::Now();
    queued.position = static_cast<int32_t>(queue_.size());
    queued.kv_bytes = job->prepared().kv_bytes;
    queued.rows = job->batch_rows;
    queued.seed = job->prepared().request.sampling.seed;
    queued.policy = job->prepared().policy;
    queued.prompt_tokens = static_cast<int32_t>(job->prepared().cond_ids.size());
    // Pushed before the job is visible to the loop, so Queued is always first.
    job->handle->Push(queued);
    queue_.push_back(job);
    ++active_requests_;
    observer_->OnQueueDepth(static_cast<int32_t>(queue_.size()));
  }
  return job->handle;
}

bool Scheduler::Drain(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  draining_ = true;
  auto idle = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return active_requests_ == 0; };
  if (mu_.AwaitWithTimeout(absl::Condition(&idle), timeout)) return true;
  abort_.store(true, std::memory_order_release);
  mu_.Await(absl::Condition(&idle));  // within one step plus one image decode
  return false;
}

void Scheduler::StopAfterFatalError(const absl::Status& failed) {
  std::deque<JobPtr> queued;
  {
    absl::MutexLock lock(&mu_);
    fatal_ = failed;
    draining_ = true;
    queued.swap(queue_);
    observer_->OnQueueDepth(0);
  }
  const absl::Status refused = absl::UnavailableError(
      absl::StrCat("server is stopping after a device error before the request ran: ", failed.message()));
  for (const JobPtr& job : queued) Finish(*job, refused);
  if (options_.on_fatal_error) options_.on_fatal_error(failed);
}

absl::Status Scheduler::fatal_error() const {
  absl::MutexLock lock(&mu_);
  return fatal_;
}

SchedulerSnapshot Scheduler::snapshot() const {
  SchedulerSnapshot s;
  absl::MutexLock lock(&mu_);
  s.queue_depth = static_cast<int32_t>(queue_.size());
  s.active_requests = active_requests_;
  s.draining = draining_;
  s.running_rows = running_batch_rows_.load();
  s.kv_bytes_reserved = kv_reserved_.load();
  return s;
}

absl::Status Scheduler::StopReason(const Job& job) const {
  if (abort_.load(std::memory_order_acquire)) {
    return absl::UnavailableError("server shut down before the request finished");
  }
  if (job.handle->cancelled()) return job.handle->cancel_reason();
  if (absl::Now() >= job.handle->deadline()) {
    return absl::DeadlineExceededError("request deadline expired");
  }
  return absl::OkStatus();
}

void Scheduler::Finish(Job& job, absl::Status status) {
  const RequestMetrics m = MeasureRequest(job, absl::Now());
  {
    // Counted down first so that a caller who has seen Finished also sees
    // the request gone from snapshot().
    absl::MutexLock lock(&mu_);
    --active_requests_;
  }
  observer_->OnRequestDone(job.policy_name, status, m);
  job.handle->Push(FinishedEvent{std::move(status), m});
}

}  // namespace argen::scheduler
