// The scheduler's loop thread: between engine steps it ends cancelled and
// expired requests, admits what fits (admission.h), then steps the engine,
// hands finished requests and due previews to the image pipeline
// (image_pipeline.h) and reports progress and gauges. It waits on nothing but
// the engine.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/device_errors.h"
#include "scheduler/admission.h"
#include "scheduler/image_pipeline.h"
#include "scheduler/job.h"
#include "scheduler/request_metrics.h"
#include "scheduler/scheduler.h"

namespace argen::scheduler {

void Scheduler::Loop() {
  std::vector<JobPtr> dropped;
  while (true) {
    dropped.clear();
    {
      absl::MutexLock lock(&mu_);
      if (running_.empty()) {
        // Idle: nothing to step. Sleep until there is something to admit.
        auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_ || !queue_.empty(); };
        mu_.Await(absl::Condition(&ready));
        if (stop_ && queue_.empty()) return;
        last_step_start_ = absl::InfinitePast();  // an idle gap is not a step interval
      }
      DropStopped(dropped);
    }
    for (const JobPtr& job : dropped) Finish(*job, StopReason(*job));
    EndCancelledRunning();
    AdmitNext();
    if (!running_.empty()) RunStep();
  }
}

void Scheduler::DropStopped(std::vector<JobPtr>& dropped) {
  const size_t before = queue_.size();
  for (auto it = queue_.begin(); it != queue_.end();) {
    if (!StopReason(**it).ok()) {
      dropped.push_back(std::move(*it));
      it = queue_.erase(it);
    } else {
      ++it;
    }
  }
  if (queue_.size() != before) observer_->OnQueueDepth(static_cast<int32_t>(queue_.size()));
}

void Scheduler::AdmitNext() {
  // In admission order; the next one that does not fit yet blocks the rest
  // (admission.h). Only this thread removes jobs from the queue, so the job
  // chosen here is still queued when it is added.
  while (true) {
    JobPtr next;
    {
      absl::MutexLock lock(&mu_);
      if (queue_.empty()) break;
      next = queue_[admission_->NextInQueue(queue_, absl::Now())];
    }
    if (!admission_->Fits(*next)) break;
    {
      absl::MutexLock lock(&mu_);
      queue_.erase(std::find(queue_.begin(), queue_.end(), next));
      observer_->OnQueueDepth(static_cast<int32_t>(queue_.size()));
    }
    AddToEngine(next);
  }
  PublishKv();
}

void Scheduler::AddToEngine(const JobPtr& job) {
  // Fits() said the engine places it now; a refusal is an engine fault.
  const int64_t pool_before = engine_->KvBytesInUse();
  absl::StatusOr<engine::GroupId> group = engine_->Add(job->request);
  if (!group.ok()) {
    Finish(*job, absl::InternalError(absl::StrCat("engine refused an admitted request: ", group.status().message())));
    return;
  }
  job->group = *group;
  job->admitted = absl::Now();
  admission_->Admitted(*job);
  job->admitted_kv_bytes = engine_->KvBytesInUse() - pool_before;
  running_.push_back(job);
  running_batch_rows_.store(admission_->batch_rows_in_use());
  kv_reserved_.store(admission_->kv_reserved());
  job->handle->Push(StartedEvent{job->admitted - job->accepted, admission_->batch_rows_in_use()});
  observer_->OnRequestStarted(job->policy_name, job->admitted - job->accepted);
}

void Scheduler::ReleaseGroup(Job& job) {
  engine_->Remove(job.group);
  job.group = -1;
  running_batch_rows_.store(admission_->batch_rows_in_use());
  kv_reserved_.store(admission_->kv_reserved());
}

void Scheduler::EndCancelledRunning() {
  std::vector<std::pair<JobPtr, absl::Status>> ended;
  for (auto it = running_.begin(); it != running_.end();) {
    absl::Status reason = StopReason(**it);
    if (reason.ok()) {
      ++it;
      continue;
    }
    ReleaseGroup(**it);
    ended.emplace_back(std::move(*it), std::move(reason));
    it = running_.erase(it);
  }
  if (ended.empty()) return;
  // Gauges first: whoever sees the request end also sees it gone from them.
  PublishKv();
  for (auto& [job, reason] : ended) Finish(*job, std::move(reason));
}

void Scheduler::PublishKv() {
  observer_->OnKvBytes(engine_->KvBytesInUse(), admission_->kv_reserved(), engine_->SharedKvBytes());
  observer_->OnRunning(admission_->batch_rows_in_use(), static_cast<int32_t>(running_.size()));
}

void Scheduler::RunStep() {
  const absl::Time start = absl::Now();
  absl::StatusOr<engine::StepReport> report = engine_->Step();
  const absl::Time end = absl::Now();
  StepStats stats;
  stats.step_index = step_index_++;
  stats.duration = end - start;
  stats.start = start;
  if (last_step_start_ != absl::InfinitePast()) {
    stats.interval = start - last_step_start_;
    stats.loop_time = start - last_step_end_;
  }
  last_step_start_ = start;
  const StepPrefill prefill = admission_->TakeStepPrefill();
  stats.rows_prefilled = prefill.batch_rows;
  stats.prefill_tokens = prefill.prompt_tokens;
  if (!report.ok()) {
    // An engine fault ends the requests in this batch; queued ones still run,
    // unless the device is gone (then nothing can run any more).
    const bool fatal = engine::IsFatalDeviceError(report.status());
    const absl::Status failed(report.status().code(),
                              absl::StrCat("engine step failed: ", report.status().message(),
                                           fatal ? " (the device is unusable; the server stops)" : ""));
    std::vector<JobPtr> ended = std::move(running_);
    running_.clear();
    for (const JobPtr& job : ended) ReleaseGroup(*job);
    PublishKv();
    for (const JobPtr& job : ended) Finish(*job, failed);
    if (fatal) StopAfterFatalError(failed);
    return;
  }
  stats.groups_prefilled = report->groups_prefilled;
  stats.rows_decoded = report->rows_decoded;

  for (const JobPtr& job : running_) {
    CountStep(*job, end, stats.duration, report->rows_decoded);
    // Tokens made this step, all images: several an image with parallel or speculative decoding.
    const int32_t done = std::min(job->progress().tokens_done, job->layout().image_tokens);
    stats.tokens_sampled += (done - job->tokens_counted) * job->prepared().request.num_images;
    job->tokens_counted = done;
  }

  // Finished groups leave now; their KV is free before the next admission.
  std::vector<JobPtr> to_decode;
  for (engine::GroupId id : report->finished) {
    auto it = std::find_if(running_.begin(), running_.end(), [id](const JobPtr& j) { return j->group == id; });
    if (it == running_.end()) continue;
    JobPtr job = *it;
    running_.erase(it);
    job->last_token = end;
    ReleaseGroup(*job);
    // Its tokens are in the request object (the engine writes them no more).
    job->handle->Push(ProgressEvent{job->layout().image_tokens, job->layout().image_tokens});
    to_decode.push_back(std::move(job));
  }
  // The batch gauges drop before any of these requests can finish.
  if (!report->finished.empty()) PublishKv();
  image_pipeline_->DecodeFinished(std::move(to_decode));

  image_pipeline_->OfferPreviews(running_);

  for (const JobPtr& job : running_) {
    if (end - job->last_progress < job->progress_interval) continue;
    job->last_progress = end;
    job->handle->Push(
        ProgressEvent{std::min(job->progress().tokens_done, job->layout().image_tokens), job->layout().image_tokens});
  }

  stats.running_rows = admission_->batch_rows_in_use();
  stats.kv_bytes_in_use = engine_->KvBytesInUse();
  stats.kv_bytes_reserved = admission_->kv_reserved();
  {
    absl::MutexLock lock(&mu_);
    stats.queue_depth = static_cast<int32_t>(queue_.size());
  }
  observer_->OnStep(stats);
  PublishKv();
  last_step_end_ = absl::Now();
}

}  // namespace argen::scheduler
