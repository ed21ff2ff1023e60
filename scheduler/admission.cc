#include "scheduler/admission.h"

#include "scheduler/priority.h"

namespace argen::scheduler {

Admission::Admission(const engine::Engine* engine, int32_t max_batch_rows, int64_t max_prefill_tokens,
                     absl::Duration priority_aging)
    : engine_(engine),
      max_batch_rows_(max_batch_rows),
      max_prefill_tokens_(max_prefill_tokens),
      priority_aging_(priority_aging) {}

size_t Admission::NextInQueue(const std::deque<JobPtr>& queue, absl::Time now) const {
  size_t best = 0;
  auto rank = [](const Job& j) { return QueuedRank{j.priority, j.accepted, j.sequence}; };
  for (size_t i = 1; i < queue.size(); ++i) {
    if (AdmitsBefore(rank(*queue[i]), rank(*queue[best]), now, priority_aging_)) best = i;
  }
  return best;
}

bool Admission::Fits(const Job& next) const {
  if (batch_rows_in_use() + next.batch_rows > max_batch_rows_ || !engine_->CanAdd(next.prepared())) return false;
  // The first request admitted for a step always fits the prefill bound (a larger one still runs).
  if (max_prefill_tokens_ > 0 && next_step_.prompt_tokens > 0 &&
      next_step_.prompt_tokens + next.prompt_tokens > max_prefill_tokens_) {
    return false;
  }
  return true;
}

void Admission::Admitted(const Job& job) {
  next_step_.batch_rows += job.batch_rows;
  next_step_.prompt_tokens += job.prompt_tokens;
}

StepPrefill Admission::TakeStepPrefill() {
  StepPrefill taken = next_step_;
  next_step_ = StepPrefill{};
  return taken;
}

}  // namespace argen::scheduler
