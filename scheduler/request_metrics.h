// What one request cost, reported in its last event and to the observer.
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
  double mean_batch_rows = 0;    // mean decode-batch rows over the steps it decoded in
  int32_t steps = 0;             // engine steps it took part in (prefill included)
  int32_t rows = 0;              // its own rows
  int32_t images = 0;            // images delivered
};

}  // namespace argen::scheduler
