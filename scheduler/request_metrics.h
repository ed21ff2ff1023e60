// What one request cost, reported in its last event and to the observer, and
// how the scheduler counts it.
#pragma once

#include <cstdint>

#include "absl/time/time.h"

namespace argen::scheduler {

struct RequestMetrics {
  absl::Duration queue_wait;     // accepted -> joined the batch
  absl::Duration prefill;        // the engine step that prefilled it
  absl::Duration decode;         // after prefill -> last token sampled
  absl::Duration vq_decode;      // VQ decode (the whole call its images were in) + image encoding of all its images
  absl::Duration total;          // accepted -> finished
  double tokens_per_second = 0;  // image tokens of all images / (prefill + decode)
  double images_per_second = 0;  // images / total
  int64_t peak_kv_bytes = 0;     // its reserved (exact, policy-bounded) KV
  double mean_batch_rows = 0;    // mean decode-batch rows (batch rows, 2 per image) over the steps it decoded in
  int32_t steps = 0;             // engine steps it took part in (prefill included)
  int32_t rows = 0;              // its own batch rows (2 per image)
  int64_t drafts_proposed = 0;   // speculative decoding: draft tokens verified (all images)
  int64_t drafts_accepted = 0;   // and accepted
  int32_t images = 0;            // images delivered
  int32_t prompt_tokens = 0;     // its caption row's prompt tokens (one row)
};

// The scheduler's side (scheduler/job.h is internal to scheduler/).
struct Job;

// Counts one engine step `job` took part in, which ended at `end` after
// `duration` and decoded `decode_batch_rows` batch rows: its first step is
// its prefill, the others decode steps. Call it after the step: it reads
// the request's progress, which the engine has advanced.
void CountStep(Job& job, absl::Time end, absl::Duration duration, int32_t decode_batch_rows);

// `job`'s figures when it finishes at `now` (whatever it reached).
RequestMetrics MeasureRequest(const Job& job, absl::Time now);

}  // namespace argen::scheduler
