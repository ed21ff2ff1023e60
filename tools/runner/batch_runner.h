// One driver of the engine contract for the offline tools (argen_generate,
// argen_sweep, argen_characterize): runs a list of jobs through an
// engine::Engine with continuous batching.
//
// Jobs are prepared and admitted in list order (FIFO: a job that does not fit
// yet is not overtaken) while the rows in flight stay within a cap and,
// optionally, their KV bytes within a budget. The engine steps; every job that
// finished in a step is removed at once (freeing its rows and KV), optionally
// VQ-decoded, and handed to a callback exactly once, and waiting jobs join
// before the next step.
//
// Depends only on engine/engine.h, never on a backend. It assumes it is the
// engine's only user while it runs (RunningRows and KvBytesInUse are its
// jobs').
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "engine/engine.h"

namespace argen::runner {

struct Job {
  engine::GenerationRequest request;
  int64_t tag = 0;  // the caller's name for the job, handed back with its result or its error
};

struct FinishedJob {
  int64_t tag = 0;
  int64_t sequence = 0;                              // 0, 1, 2, ... in the order jobs finished stepping
  std::vector<std::vector<int32_t>> tokens;          // [image][token], raster order
  std::vector<engine::RgbImage> images;              // [image] with RunOptions::decode_images; else empty
  double seconds = 0;                                // from its Add to its last token
  int32_t steps = 0;                                 // engine steps it took part in (engine::RequestProgress)
  int64_t drafts_proposed = 0, drafts_accepted = 0;  // speculative decoding's (engine::RequestProgress)
};

struct RunOptions {
  int32_t max_rows = 256;    // rows in flight; a job needs 2 x num_images (a CFG pair per image)
  int64_t max_kv_bytes = 0;  // PreparedRequest::kv_bytes in flight; 0: no cap but the engine's pool
  // No job is admitted at or after the deadline, nor once *stop is true;
  // admitted jobs still finish and are handed over.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  const std::atomic<bool>* stop = nullptr;
  bool decode_images = false;  // DecodeImages the tokens of finished jobs
  int32_t decode_batch = 1;    // at most this many finished jobs per DecodeImages call
  // 0: decoding and on_finished run on the stepping thread. N > 0: on N worker
  // threads, overlapping the next steps; on_finished may then be called
  // concurrently and out of order (FinishedJob::sequence gives the order).
  int32_t worker_threads = 0;
  // Finished jobs waiting for a worker before stepping blocks (bounded
  // memory); 0: 4 x worker_threads x decode_batch.
  int32_t max_queued = 0;
};

// Hooks return an error to stop the run; it is reported as the run's error.
struct RunHooks {
  // After a job's Add, before the Step that prefills it. Stepping thread.
  std::function<absl::Status(const Job&, const engine::PreparedRequest&)> on_admitted;
  // After every Step, before its finished jobs are handed over. Stepping thread.
  std::function<absl::Status(const engine::StepReport&)> on_step;
  // Once per finished job; see RunOptions::worker_threads for the thread.
  std::function<absl::Status(FinishedJob)> on_finished;
};

struct RunResult {
  // The first error (from Prepare/Add/Step/DecodeImages, a hook, or a
  // job that can never fit under the caps); the run stops at it. Jobs already
  // queued for a worker when the stepping thread fails are still handed over;
  // after a decoding or on_finished error nothing more is.
  // OK: every admitted job was handed over.
  absl::Status status;
  std::optional<int64_t> failed_tag;  // the job the error concerns; none for a Step error
  int64_t admitted = 0;
  int64_t finished = 0;      // on_finished calls that returned OK
  int64_t not_admitted = 0;  // jobs never added (deadline, stop flag or an error)
  int64_t peak_queued = 0;   // most finished jobs waiting for a worker at once
};

// Runs `jobs` to the end, the deadline or the stop flag, or the first error.
// Whatever happens, no group of this run is left in the engine.
RunResult RunJobs(engine::Engine& engine, const std::vector<Job>& jobs, const RunOptions& options,
                  const RunHooks& hooks);

}  // namespace argen::runner
