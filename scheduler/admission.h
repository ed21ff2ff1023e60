// Admission: which queued request joins the running batch next, whether it
// fits now, and what the admissions since the last step add to its prefill.
// What the running requests hold (batch rows, KV bytes) is the engine's to
// count (Engine::RunningRows, KvBytesInUse: its KV manager); no second count.
//
// Order: priority with aging (scheduler/priority.h); the next one is never
// overtaken, so a large request is not starved by small ones. It fits when
// its batch rows (2 per image, job.h) fit the engine's batch cap beside the
// running ones, the engine can place it now (Engine::CanAdd: the backend's
// pool is the one KV ledger) and, when something was already admitted for the
// next step, its prompt tokens keep that step's prefill within
// max_prefill_tokens (so new requests join as rows free, not in waves).
//
// Loop thread only; NextInQueue reads a queue its caller holds locked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>

#include "absl/time/time.h"
#include "engine/engine.h"
#include "scheduler/job.h"

namespace argen::scheduler {

// What the admissions since the last engine step add to it: the prefill.
struct StepPrefill {
  int32_t batch_rows = 0;
  int64_t prompt_tokens = 0;  // all those batch rows
};

class Admission {
 public:
  // `engine` must outlive it; `max_batch_rows` is the engine's batch cap;
  // `max_prefill_tokens` 0: no bound.
  Admission(const engine::Engine* engine, int32_t max_batch_rows, int64_t max_prefill_tokens,
            absl::Duration priority_aging);

  // Index into `queue` (not empty) of the request to admit next at `now`.
  size_t NextInQueue(const std::deque<JobPtr>& queue, absl::Time now) const;
  // Whether `next` can join the batch now (see above).
  bool Fits(const Job& next) const;

  // Counts `job`, just added to the engine: its batch rows and prompt tokens
  // for the next step's prefill.
  void Admitted(const Job& job);
  // What was admitted since the last call (the step about to run prefills it).
  StepPrefill TakeStepPrefill();

  // Batch rows of the running requests (the engine's count).
  int32_t batch_rows_in_use() const { return engine_->RunningRows(); }
  // What the running requests reserve: exactly what the engine placed for
  // them (their own rows and the prompts they share), since admission asks
  // the engine's KV manager whether it can place a request.
  int64_t kv_reserved() const { return engine_->KvBytesInUse(); }

 private:
  const engine::Engine* const engine_;
  const int32_t max_batch_rows_;
  const int64_t max_prefill_tokens_;
  const absl::Duration priority_aging_;
  StepPrefill next_step_;
};

}  // namespace argen::scheduler
