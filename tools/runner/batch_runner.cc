#include "tools/runner/batch_runner.h"

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"

namespace argen::runner {
namespace {

using Clock = std::chrono::steady_clock;

struct Failure {
  absl::Status status;
  std::optional<int64_t> tag;
};

// Decodes `batch` (when asked) and hands its jobs to on_finished in order.
// Counts the jobs handed over in *handed; returns the first failure.
std::optional<Failure> FinishBatch(engine::Engine& engine, const RunOptions& options, const RunHooks& hooks,
                                   std::vector<FinishedJob>& batch, int64_t* handed) {
  if (options.decode_images) {
    std::vector<std::vector<int32_t>> grids;
    for (const FinishedJob& job : batch) grids.insert(grids.end(), job.tokens.begin(), job.tokens.end());
    absl::StatusOr<std::vector<engine::RgbImage>> images = engine.DecodeImages(grids);
    if (!images.ok()) return Failure{images.status(), batch.front().tag};
    if (images->size() != grids.size()) {
      return Failure{absl::InternalError(absl::StrCat("DecodeImages returned ", images->size(), " images for ",
                                                      grids.size(), " token grids")),
                     batch.front().tag};
    }
    auto next = images->begin();
    for (FinishedJob& job : batch) {
      const auto end = next + static_cast<std::ptrdiff_t>(job.tokens.size());
      job.images.assign(std::make_move_iterator(next), std::make_move_iterator(end));
      next = end;
    }
  }
  for (FinishedJob& job : batch) {
    const int64_t tag = job.tag;
    if (hooks.on_finished) {
      if (absl::Status s = hooks.on_finished(std::move(job)); !s.ok()) return Failure{s, tag};
    }
    ++*handed;
  }
  return std::nullopt;
}

// Worker threads that take up to decode_batch queued jobs at a time and
// finish them (FinishBatch), so decoding overlaps the next steps. The queue
// is bounded: Submit blocks while max_queued jobs wait. After a failure the
// rest is dropped: the run is stopping.
class FinishPool {
 public:
  FinishPool(engine::Engine& engine, const RunOptions& options, const RunHooks& hooks)
      : engine_(engine), options_(options), hooks_(hooks) {
    const int32_t batch = std::max(1, options.decode_batch);
    max_queued_ = options.max_queued > 0 ? options.max_queued : 4 * options.worker_threads * batch;
    for (int32_t i = 0; i < options.worker_threads; ++i) workers_.emplace_back([this, batch] { Loop(batch); });
  }
  ~FinishPool() { Close(); }

  void Submit(FinishedJob job) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      space_cv_.wait(lock, [this] { return static_cast<int64_t>(queue_.size()) < max_queued_ || failure_; });
      if (failure_) return;
      queue_.push_back(std::move(job));
      peak_queued_ = std::max(peak_queued_, static_cast<int64_t>(queue_.size()));
    }
    work_cv_.notify_one();
  }

  // Lets the workers drain the queue and joins them.
  void Close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closing_ = true;
    }
    work_cv_.notify_all();
    for (std::thread& t : workers_) t.join();
    workers_.clear();
  }

  std::optional<Failure> failure() {
    std::lock_guard<std::mutex> lock(mu_);
    return failure_;
  }
  int64_t finished() {
    std::lock_guard<std::mutex> lock(mu_);
    return finished_;
  }
  int64_t peak_queued() {
    std::lock_guard<std::mutex> lock(mu_);
    return peak_queued_;
  }

 private:
  void Loop(int32_t batch_size) {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      work_cv_.wait(lock, [this] { return closing_ || !queue_.empty(); });
      if (queue_.empty()) return;  // closing and nothing left
      std::vector<FinishedJob> batch;
      while (!queue_.empty() && static_cast<int32_t>(batch.size()) < batch_size) {
        batch.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
      const bool failed = failure_.has_value();
      lock.unlock();
      space_cv_.notify_all();
      int64_t handed = 0;
      std::optional<Failure> f = failed ? std::nullopt : FinishBatch(engine_, options_, hooks_, batch, &handed);
      lock.lock();
      finished_ += handed;
      if (f && !failure_) failure_ = std::move(f);
      space_cv_.notify_all();  // a blocked Submit returns after a failure
    }
  }

  engine::Engine& engine_;
  const RunOptions& options_;
  const RunHooks& hooks_;
  int64_t max_queued_ = 1;
  std::mutex mu_;
  std::condition_variable work_cv_;   // workers: a job, or closing
  std::condition_variable space_cv_;  // Submit: room in the queue, or a failure
  std::deque<FinishedJob> queue_;
  bool closing_ = false;
  std::optional<Failure> failure_;
  int64_t finished_ = 0;
  int64_t peak_queued_ = 0;
  std::vector<std::thread> workers_;
};

struct Running {
  int64_t tag = 0;
  Clock::time_point added;
  engine::RequestPtr request;  // shared with the engine: its progress and, finished, its tokens
};

}  // namespace

RunResult RunJobs(engine::Engine& engine, const std::vector<Job>& jobs, const RunOptions& options,
                  const RunHooks& hooks) {
  RunResult result;
  std::unique_ptr<FinishPool> pool;
  if (options.worker_threads > 0) pool = std::make_unique<FinishPool>(engine, options, hooks);
  const size_t decode_batch = static_cast<size_t>(std::max(1, options.decode_batch));
  auto stopping = [&] {
    return (options.deadline && Clock::now() >= *options.deadline) || (options.stop && options.stop->load());
  };

  std::map<engine::GroupId, Running> running;
  engine::RequestPtr pending;  // jobs[next], prepared, waiting for room (null: none)
  size_t next = 0;
  int64_t sequence = 0;
  std::optional<Failure> failure;
  while (!failure) {
    // Admit in order while there is room.
    while (next < jobs.size() && !stopping()) {
      const Job& job = jobs[next];
      if (!pending) {
        absl::StatusOr<engine::PreparedRequest> prepared = engine.Prepare(job.request);
        if (!prepared.ok()) {
          failure = Failure{prepared.status(), job.tag};
          break;
        }
        pending = engine::MakeRequest(*std::move(prepared));
      }
      const int32_t rows = 2 * pending->prepared.request.num_images;
      if (rows > options.max_rows) {
        failure = Failure{absl::InvalidArgumentError(absl::StrCat(
                              "the job needs ", rows, " rows (2 per image); the row cap is ", options.max_rows)),
                          job.tag};
        break;
      }
      if (options.max_kv_bytes > 0 && pending->prepared.kv_bytes > options.max_kv_bytes) {
        failure = Failure{absl::ResourceExhaustedError(absl::StrCat("the job needs ", pending->prepared.kv_bytes,
                                                                    " KV bytes; the KV cap is ", options.max_kv_bytes)),
                          job.tag};
        break;
      }
      if (engine.RunningRows() + rows > options.max_rows) break;
      if (options.max_kv_bytes > 0 && engine.KvBytesInUse() + pending->prepared.kv_bytes > options.max_kv_bytes) break;
      // The engine's pool has no room now: wait for running jobs to free theirs.
      if (!running.empty() && !engine.CanAdd(pending->prepared)) break;
      absl::StatusOr<engine::GroupId> id = engine.Add(pending);
      if (!id.ok()) {
        if (absl::IsResourceExhausted(id.status()) && !running.empty()) break;
        failure = Failure{id.status(), job.tag};
        break;
      }
      running[*id] = {job.tag, Clock::now(), pending};
      ++next;
      ++result.admitted;
      const engine::RequestPtr admitted = std::move(pending);
      pending.reset();
      if (hooks.on_admitted) {
        if (absl::Status s = hooks.on_admitted(job, admitted->prepared); !s.ok()) {
          failure = Failure{s, job.tag};
          break;
        }
      }
    }
    if (failure) break;
    if (running.empty()) {
      if (next < jobs.size() && !stopping()) {
        // Only another user of the engine can hold the room an idle run needs.
        failure = Failure{absl::FailedPreconditionError(absl::StrCat(
                              "the job does not fit although none of this run's jobs is running (the engine "
                              "has ",
                              engine.RunningRows(), " rows and ", engine.KvBytesInUse(), " KV bytes in use)")),
                          jobs[next].tag};
      }
      break;
    }

    absl::StatusOr<engine::StepReport> report = engine.Step();
    if (!report.ok()) {
      failure = Failure{report.status(), std::nullopt};
      break;
    }
    if (hooks.on_step) {
      if (absl::Status s = hooks.on_step(*report); !s.ok()) {
        failure = Failure{s, std::nullopt};
        break;
      }
    }
    std::vector<FinishedJob> done;
    for (engine::GroupId id : report->finished) {
      auto it = running.find(id);
      if (it == running.end()) {
        failure = Failure{
            absl::InternalError(absl::StrCat("Step reported group ", id, " finished; it is not one of this run's")),
            std::nullopt};
        break;
      }
      FinishedJob job;
      job.tag = it->second.tag;
      job.sequence = sequence++;
      // The request object's tokens (the engine writes them no more).
      const engine::RequestProgress& progress = it->second.request->progress;
      job.steps = progress.steps;
      job.drafts_proposed = progress.drafts_proposed;
      job.drafts_accepted = progress.drafts_accepted;
      job.tokens = std::move(it->second.request->progress.tokens);
      job.seconds = std::chrono::duration<double>(Clock::now() - it->second.added).count();
      engine.Remove(id);
      running.erase(it);
      done.push_back(std::move(job));
    }
    if (failure) break;
    if (pool) {
      for (FinishedJob& job : done) pool->Submit(std::move(job));
      failure = pool->failure();
    } else {
      for (size_t i = 0; i < done.size() && !failure; i += decode_batch) {
        std::vector<FinishedJob> batch;
        for (size_t j = i; j < std::min(done.size(), i + decode_batch); ++j) batch.push_back(std::move(done[j]));
        failure = FinishBatch(engine, options, hooks, batch, &result.finished);
      }
    }
  }

  for (const auto& [id, r] : running) engine.Remove(id);  // after an error
  if (pool) {
    pool->Close();
    result.finished += pool->finished();
    result.peak_queued = pool->peak_queued();
    if (!failure) failure = pool->failure();
  }
  result.not_admitted = static_cast<int64_t>(jobs.size() - next);
  if (failure) {
    result.status = failure->status;
    result.failed_tag = failure->tag;
  }
  return result;
}

}  // namespace argen::runner
