#include "server/step_log.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace argen::server {

absl::StatusOr<std::unique_ptr<StepLog>> StepLog::Open(const std::string& path, scheduler::SchedulerObserver* inner) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) return absl::InvalidArgumentError(absl::StrCat("key 'step_log': cannot write \"", path, "\""));
  std::fprintf(f, "%s\n", kHeader);
  std::fflush(f);
  return std::unique_ptr<StepLog>(new StepLog(f, inner));
}

StepLog::StepLog(std::FILE* file, scheduler::SchedulerObserver* inner) : file_(file), inner_(inner) {
  writer_ = std::thread([this] { WriteLoop(); });
}

StepLog::~StepLog() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  writer_.join();
  std::fclose(file_);
}

void StepLog::OnStep(const scheduler::StepStats& s) {
  inner_->OnStep(s);
  if (origin_ == absl::InfinitePast()) origin_ = s.start;
  const std::string line = absl::StrFormat(
      "%d %.4f %.3f %.3f %.3f %d %d %d %d %d %d %d\n", s.step_index, absl::ToDoubleSeconds(s.start - origin_),
      absl::ToDoubleMilliseconds(s.interval), absl::ToDoubleMilliseconds(s.duration),
      absl::ToDoubleMilliseconds(s.loop_time), s.rows_decoded, s.rows_prefilled, s.prefill_tokens, s.groups_prefilled,
      s.running_rows, s.queue_depth, s.tokens_sampled);
  absl::MutexLock lock(&mu_);
  pending_ += line;
}

void StepLog::WriteLoop() {
  std::string out;
  while (true) {
    bool stop = false;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return stop_ || !pending_.empty(); };
      mu_.AwaitWithTimeout(absl::Condition(&ready), absl::Milliseconds(200));
      out.swap(pending_);
      stop = stop_;
    }
    if (!out.empty()) {
      std::fwrite(out.data(), 1, out.size(), file_);
      std::fflush(file_);
      out.clear();
    }
    if (stop) return;
  }
}

}  // namespace argen::server
