#include "scheduler/scheduler.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/device_errors.h"
#include "engine/request_rules.h"
#include "engine/sparse/policy_params.h"
#include "scheduler/preview.h"
#include "scheduler/request_id.h"

namespace argen::scheduler {

struct Scheduler::Job {
  std::shared_ptr<RequestHandle> handle;
  engine::PreparedRequest prepared;
  engine::ImageLayout layout;  // its image size's (engine::RequestLayout)
  std::string policy_name;
  int64_t kv_bytes = 0;           // PreparedRequest::kv_bytes: the most its admission takes
  int64_t own_kv_bytes = 0;       // PreparedRequest::own_kv_bytes: its rows', for its life
  int64_t admitted_kv_bytes = 0;  // what its admission took (its rows and any shared prompt it was first to need)
  int32_t rows = 0;           // 2 x num_images
  int64_t prompt_tokens = 0;  // prefilled tokens, all rows
  absl::Duration progress_interval;
  absl::Time accepted;
  absl::Time admitted = absl::InfinitePast();
  absl::Time prefilled = absl::InfinitePast();
  absl::Time last_token = absl::InfinitePast();
  absl::Time last_progress = absl::InfinitePast();
  absl::Duration prefill_time;
  absl::Duration vq_time;
  engine::GroupId group = -1;
  int32_t steps = 0;         // steps taken part in; == image tokens sampled per image
  int32_t decode_steps = 0;  // steps after its prefill step
  int64_t decode_rows_sum = 0;
  int32_t images_sent = 0;
  std::vector<std::vector<int32_t>> tokens;  // filled when its last token is sampled
  Priority priority = Priority::kNormal;
  int64_t sequence = 0;               // acceptance order
  ImageEncoder encoder;               // empty: the scheduler's
  std::vector<int32_t> preview_rows;  // token rows each preview shows (loop thread)
  size_t next_preview = 0;            // loop thread
  std::atomic<bool> preview_in_flight{false};
  absl::Mutex deliver_mu;  // orders previews before the final images
  bool images_started ABSL_GUARDED_BY(deliver_mu) = false;
};

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
      encoder_(std::move(encoder)),
      observer_(observer != nullptr ? observer : &no_observer_),
      max_batch_rows_(engine->info().max_batch_rows),
      image_workers_(std::make_unique<TaskWorkers>(options.image_workers)) {
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
  image_workers_.reset();  // runs what is queued (each ends at once under abort_)
}

absl::StatusOr<std::shared_ptr<RequestHandle>> Scheduler::Submit(const engine::GenerationRequest& request,
                                                                 const SubmitOptions& submit) {
  const std::string requested_policy(sparse::PolicyName(request.policy.kind));
  auto reject = [&](absl::Status status) {
    observer_->OnRequestDone(requested_policy, status, RequestMetrics{});
    return status;
  };
  // The request's image size: its token rows bound the previews.
  absl::StatusOr<engine::ImageLayout> layout = engine::RequestLayout(request, engine_->info());
  if (!layout.ok()) return reject(layout.status());
  const int32_t token_grid = TokenRows(*layout);
  const int32_t max_previews = MaxPreviews(*layout);
  if (submit.previews < 0 || submit.previews > max_previews) {
    return reject(
        absl::InvalidArgumentError(absl::StrCat("previews: must be in [0, ", max_previews, "] for this model (",
                                                token_grid, " token rows), got ", submit.previews)));
  }
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

  auto job = std::make_shared<Job>();
  job->policy_name = std::string(sparse::PolicyName(prepared->policy.kind));
  job->kv_bytes = prepared->kv_bytes;
  job->own_kv_bytes = prepared->own_kv_bytes;
  job->rows = 2 * prepared->request.num_images;
  job->prompt_tokens = static_cast<int64_t>(job->rows) * static_cast<int64_t>(prepared->cond_ids.size());
  job->prepared = *std::move(prepared);
  job->progress_interval =
      submit.progress_interval > absl::ZeroDuration() ? submit.progress_interval : options_.progress_interval;
  job->priority = submit.priority;
  job->encoder = submit.encoder;
  job->layout = *layout;
  job->preview_rows = PreviewRows(submit.previews, token_grid);

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
    queued.kv_bytes = job->kv_bytes;
    queued.rows = job->rows;
    queued.seed = job->prepared.request.sampling.seed;
    queued.policy = job->prepared.policy;
    queued.prompt_tokens = static_cast<int32_t>(job->prepared.cond_ids.size());
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
  s.running_rows = running_rows_.load();
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
  // Priority order with aging; the next one that does not fit yet blocks the
  // rest (no overtaking, so a large request is not starved by small ones). It
  // fits when its rows fit the batch cap beside what runs and the engine can
  // place it now: the pool is the one ledger. Only this thread removes jobs
  // from the queue, so the job chosen here is still queued when it is added.
  // The prompt tokens the next step prefills stay within max_prefill_tokens
  // (the first admitted request excepted), so admissions spread over steps.
  while (true) {
    JobPtr next;
    {
      absl::MutexLock lock(&mu_);
      if (queue_.empty()) break;
      next = queue_[NextInQueue(absl::Now())];
    }
    if (rows_in_use_ + next->rows > max_batch_rows_ || !engine_->CanAdd(next->prepared)) break;
    if (options_.max_prefill_tokens > 0 && tokens_admitted_ > 0 &&
        tokens_admitted_ + next->prompt_tokens > options_.max_prefill_tokens) {
      break;
    }
    {
      absl::MutexLock lock(&mu_);
      queue_.erase(std::find(queue_.begin(), queue_.end(), next));
      observer_->OnQueueDepth(static_cast<int32_t>(queue_.size()));
    }
    AddToEngine(next);
  }
  PublishKv();
}

size_t Scheduler::NextInQueue(absl::Time now) const {
  size_t best = 0;
  auto rank = [](const Job& j) { return QueuedRank{j.priority, j.accepted, j.sequence}; };
  for (size_t i = 1; i < queue_.size(); ++i) {
    if (AdmitsBefore(rank(*queue_[i]), rank(*queue_[best]), now, options_.priority_aging)) best = i;
  }
  return best;
}

void Scheduler::AddToEngine(const JobPtr& job) {
  // CanAdd said the engine places it now; a refusal is an engine fault.
  const int64_t pool_before = engine_->KvBytesInUse();
  absl::StatusOr<engine::GroupId> group = engine_->Add(job->prepared);
  if (!group.ok()) {
    Finish(*job, absl::InternalError(absl::StrCat("engine refused an admitted request: ", group.status().message())));
    return;
  }
  job->group = *group;
  job->admitted = absl::Now();
  rows_admitted_ += job->rows;
  tokens_admitted_ += job->prompt_tokens;
  rows_in_use_ += job->rows;
  kv_in_use_ += job->own_kv_bytes;
  job->admitted_kv_bytes = engine_->KvBytesInUse() - pool_before;
  running_.push_back(job);
  running_rows_.store(rows_in_use_);
  kv_reserved_.store(KvReserved());
  job->handle->Push(StartedEvent{job->admitted - job->accepted, rows_in_use_});
  observer_->OnRequestStarted(job->policy_name, job->admitted - job->accepted);
}

void Scheduler::ReleaseGroup(Job& job) {
  engine_->Remove(job.group);
  job.group = -1;
  kv_in_use_ -= job.own_kv_bytes;
  rows_in_use_ -= job.rows;
  running_rows_.store(rows_in_use_);
  kv_reserved_.store(KvReserved());
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
  observer_->OnKvBytes(engine_->KvBytesInUse(), KvReserved(), engine_->SharedKvBytes());
  observer_->OnRunning(rows_in_use_, static_cast<int32_t>(running_.size()));
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
  stats.rows_prefilled = rows_admitted_;
  stats.prefill_tokens = tokens_admitted_;
  rows_admitted_ = 0;
  tokens_admitted_ = 0;
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
    if (job->steps == 0) {
      job->prefilled = end;
      job->prefill_time = stats.duration;
    } else {
      ++job->decode_steps;
      job->decode_rows_sum += report->rows_decoded;
    }
    ++job->steps;
    stats.tokens_sampled += job->prepared.request.num_images;
  }

  // Finished groups leave now; their KV is free before the next admission.
  std::vector<JobPtr> to_decode;
  for (engine::GroupId id : report->finished) {
    auto it = std::find_if(running_.begin(), running_.end(), [id](const JobPtr& j) { return j->group == id; });
    if (it == running_.end()) continue;
    JobPtr job = *it;
    running_.erase(it);
    job->last_token = end;
    absl::StatusOr<engine::GroupState> state = engine_->State(id);
    ReleaseGroup(*job);
    if (!state.ok()) {
      PublishKv();
      Finish(*job, absl::InternalError(absl::StrCat("engine lost the finished group: ", state.status().message())));
      continue;
    }
    job->tokens = std::move(state->tokens);
    job->handle->Push(ProgressEvent{job->layout.image_tokens, job->layout.image_tokens});
    to_decode.push_back(std::move(job));
  }
  // The batch gauges drop before any of these requests can finish.
  if (!report->finished.empty()) PublishKv();
  if (!to_decode.empty()) {
    {
      absl::MutexLock lock(&decode_mu_);
      for (JobPtr& job : to_decode) decode_queue_.push_back(std::move(job));
    }
    // One task per job: each takes whatever is queued when it runs (the first
    // takes a batch, later ones may find it gone), so a decode never waits for
    // a batch to fill.
    for (size_t i = 0; i < to_decode.size(); ++i) image_workers_->Post([this] { DecodeQueued(); });
  }

  OfferPreviews();

  for (const JobPtr& job : running_) {
    if (end - job->last_progress < job->progress_interval) continue;
    job->last_progress = end;
    job->handle->Push(ProgressEvent{std::min(job->steps, job->layout.image_tokens), job->layout.image_tokens});
  }

  stats.running_rows = rows_in_use_;
  stats.kv_bytes_in_use = engine_->KvBytesInUse();
  stats.kv_bytes_reserved = KvReserved();
  {
    absl::MutexLock lock(&mu_);
    stats.queue_depth = static_cast<int32_t>(queue_.size());
  }
  observer_->OnStep(stats);
  PublishKv();
  last_step_end_ = absl::Now();
}

void Scheduler::OfferPreviews() {
  for (const JobPtr& job : running_) {
    // Tokens per token row of its size: the grid's width and its row breaks
    // (Lumina-mGPT), else a square grid's side.
    const int32_t stride = TokensPerRow(job->layout);
    if (job->next_preview >= job->preview_rows.size()) continue;
    const int32_t rows = job->preview_rows[job->next_preview];
    if (job->steps < rows * stride) continue;
    const int32_t index = static_cast<int32_t>(job->next_preview++);
    const int32_t images = job->prepared.request.num_images;
    // Dropped, never queued: the previous preview is still being decoded, the
    // image workers are all busy (final images first), or the client has not
    // taken the previous preview yet.
    const char* drop = nullptr;
    if (job->preview_in_flight.load(std::memory_order_acquire) || image_workers_->pending() >= options_.image_workers) {
      drop = "image_path_busy";
    } else if (job->handle->pending_previews() > 0) {
      drop = "client_slow";
    }
    absl::StatusOr<engine::GroupState> state;
    if (drop == nullptr) {
      state = engine_->State(job->group);
      if (!state.ok()) drop = "failed";
    }
    if (drop != nullptr) {
      for (int32_t i = 0; i < images; ++i) observer_->OnPreviewDropped(drop);
      continue;
    }
    job->preview_in_flight.store(true, std::memory_order_release);
    image_workers_->Post([this, job, index, rows, sampled = std::move(state->tokens)]() mutable {
      DecodePreview(job, index, rows, std::move(sampled));
    });
  }
}

void Scheduler::DecodePreview(const JobPtr& job, int32_t index, int32_t rows,
                              std::vector<std::vector<int32_t>> sampled) {
  const engine::ImageLayout& layout = job->layout;  // the request's size
  const bool has_width = layout.grid.width > 0;
  const int32_t width = has_width ? layout.grid.width : layout.grid_w;
  const int32_t row_break = has_width ? layout.grid.row_break_tokens : 0;
  const int32_t total_rows = TokenRows(layout);
  const int32_t images = static_cast<int32_t>(sampled.size());
  auto drop_all = [&](const char* reason) {
    for (int32_t i = 0; i < images; ++i) observer_->OnPreviewDropped(reason);
    job->preview_in_flight.store(false, std::memory_order_release);
  };
  if (!StopReason(*job).ok()) return drop_all("request_ended");
  std::vector<std::vector<int32_t>> grids;
  for (const std::vector<int32_t>& tokens : sampled) {
    absl::StatusOr<std::vector<int32_t>> g = PreviewTokens(tokens, rows, width, row_break, total_rows);
    if (!g.ok()) return drop_all("failed");
    grids.push_back(*std::move(g));
  }
  absl::StatusOr<std::vector<engine::RgbImage>> rgb = engine_->DecodeImages(grids);
  if (!rgb.ok() || static_cast<int32_t>(rgb->size()) != images) return drop_all("failed");
  const ImageEncoder& encode = job->encoder ? job->encoder : encoder_;
  std::vector<PreviewEvent> events;
  for (int32_t i = 0; i < images; ++i) {
    engine::RgbImage& image = (*rgb)[i];
    PaintUnsampledRows(image, rows, total_rows);
    absl::StatusOr<std::string> encoded = encode(image);
    if (!encoded.ok()) return drop_all("failed");
    PreviewEvent e;
    e.index = index;
    e.image = i;
    e.rows_done = rows;
    e.tokens_done = rows * (width + row_break);
    e.width = image.width;
    e.height = image.height;
    e.encoded = *std::move(encoded);
    events.push_back(std::move(e));
  }
  bool late = false;
  {
    absl::MutexLock lock(&job->deliver_mu);
    late = job->images_started;
    if (!late) {
      for (PreviewEvent& e : events) job->handle->Push(std::move(e));
    }
  }
  if (late) return drop_all("late");
  job->preview_in_flight.store(false, std::memory_order_release);
}

void Scheduler::DecodeQueued() {
  std::vector<JobPtr> batch;
  {
    absl::MutexLock lock(&decode_mu_);
    int32_t images = 0;
    while (!decode_queue_.empty()) {
      const int32_t n = static_cast<int32_t>(decode_queue_.front()->tokens.size());
      if (!batch.empty() && images + n > options_.max_decode_batch) break;
      images += n;
      batch.push_back(std::move(decode_queue_.front()));
      decode_queue_.pop_front();
    }
  }
  std::vector<JobPtr> live;
  std::vector<std::vector<int32_t>> grids;
  for (JobPtr& job : batch) {
    {
      absl::MutexLock lock(&job->deliver_mu);
      job->images_started = true;
    }
    if (absl::Status reason = StopReason(*job); !reason.ok()) {
      Finish(*job, std::move(reason));
      continue;
    }
    for (std::vector<int32_t>& tokens : job->tokens) grids.push_back(std::move(tokens));
    live.push_back(std::move(job));
  }
  if (live.empty()) return;
  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<engine::RgbImage>> rgb = engine_->DecodeImages(grids);
  const absl::Duration decode_time = absl::Now() - start;
  if (!rgb.ok() || rgb->size() != grids.size()) {
    const std::string why = rgb.ok() ? absl::StrCat("engine returned ", rgb->size(), " of ", grids.size(), " images")
                                     : std::string(rgb.status().message());
    for (const JobPtr& job : live) {
      Finish(*job, absl::InternalError(absl::StrCat("VQ decode of image 0 failed: ", why)));
    }
    return;
  }
  size_t next = 0;
  for (const JobPtr& job : live) {
    const size_t n = job->tokens.size();
    std::vector<engine::RgbImage> mine(std::make_move_iterator(rgb->begin() + next),
                                       std::make_move_iterator(rgb->begin() + next + n));
    next += n;
    // The request waited for the whole call: its vq_decode counts all of it.
    image_workers_->Post([this, job, mine = std::move(mine), decode_time]() mutable {
      EncodeAndDeliver(job, std::move(mine), decode_time);
    });
  }
}

void Scheduler::EncodeAndDeliver(const JobPtr& job, std::vector<engine::RgbImage> rgb, absl::Duration decode_time) {
  const ImageEncoder& encode = job->encoder ? job->encoder : encoder_;
  job->vq_time += decode_time;
  for (size_t i = 0; i < rgb.size(); ++i) {
    if (absl::Status reason = StopReason(*job); !reason.ok()) {
      Finish(*job, std::move(reason));
      return;
    }
    const absl::Time start = absl::Now();
    absl::StatusOr<std::string> encoded = encode(rgb[i]);
    if (!encoded.ok()) {
      Finish(*job, absl::InternalError(absl::StrCat("encoding image ", i, " failed: ", encoded.status().message())));
      return;
    }
    job->vq_time += absl::Now() - start;
    ImageEvent event;
    event.index = static_cast<int32_t>(i);
    event.seed = job->prepared.request.sampling.seed;
    event.width = rgb[i].width;
    event.height = rgb[i].height;
    event.encoded = *std::move(encoded);
    job->handle->Push(std::move(event));
    ++job->images_sent;
    const absl::Duration since_accepted = absl::Now() - job->accepted;
    if (i == 0) observer_->OnFirstImage(job->policy_name, since_accepted);
    observer_->OnImage(job->policy_name, since_accepted);
  }
  // A cancel that came with the last image (e.g. its push overflowed the
  // stream buffer and was dropped) must not end as OK.
  if (job->handle->cancelled()) {
    Finish(*job, job->handle->cancel_reason());
    return;
  }
  Finish(*job, absl::OkStatus());
}

void Scheduler::Finish(Job& job, absl::Status status) {
  const absl::Time now = absl::Now();
  RequestMetrics m;
  const bool was_admitted = job.admitted != absl::InfinitePast();
  m.queue_wait = (was_admitted ? job.admitted : now) - job.accepted;
  m.prefill = job.prefill_time;
  if (job.prefilled != absl::InfinitePast()) {
    m.decode = (job.last_token != absl::InfinitePast() ? job.last_token : now) - job.prefilled;
  }
  m.vq_decode = job.vq_time;
  m.total = now - job.accepted;
  m.rows = job.rows;
  m.steps = job.steps;
  m.images = job.images_sent;
  m.peak_kv_bytes = was_admitted ? job.admitted_kv_bytes : 0;
  const double gen_seconds = absl::ToDoubleSeconds(m.prefill + m.decode);
  if (gen_seconds > 0) {
    m.tokens_per_second = static_cast<double>(job.steps) * job.prepared.request.num_images / gen_seconds;
  }
  if (m.total > absl::ZeroDuration()) {
    m.images_per_second = job.images_sent / absl::ToDoubleSeconds(m.total);
  }
  m.mean_batch_rows = job.decode_steps > 0 ? static_cast<double>(job.decode_rows_sum) / job.decode_steps
                                           : static_cast<double>(job.rows);
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
