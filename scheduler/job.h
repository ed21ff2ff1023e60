// One accepted request as the scheduler tracks it, from Submit to its
// Finished event. Internal to scheduler/: shared by intake and the step loop
// (scheduler.cc, step_loop.cc), admission (admission.h), the image pipeline
// (image_pipeline.h) and the request's figures (request_metrics.h).
//
// Two kinds of rows meet here, and the names say which:
//   * batch rows: rows of the engine's batch, each with its own KV (a CFG
//     pair per image: cond + uncond, so 2 per image); the engine's batch cap
//     max_batch_rows counts these;
//   * token rows: rows of an image's token grid (what a preview shows).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/engine.h"
#include "scheduler/priority.h"
#include "scheduler/request_handle.h"
#include "scheduler/scheduler_options.h"

namespace argen::scheduler {

// Batch rows of a request of `num_images` images: one CFG pair each.
inline int32_t BatchRowsOf(int32_t num_images) { return 2 * num_images; }

struct Job {
  std::shared_ptr<RequestHandle> handle;
  // The request object it shares with the engine (engine/engine.h): what
  // Prepare made (its layout, resolved policy, KV need; constant) and its
  // progress (the engine's one count of tokens made, and the tokens).
  engine::RequestPtr request;
  const engine::PreparedRequest& prepared() const { return request->prepared; }
  const engine::ImageLayout& layout() const { return request->prepared.layout; }  // its image size's
  const engine::RequestProgress& progress() const { return request->progress; }
  std::string policy_name;        // sparse::PolicyName(prepared().policy.kind), for the observer
  int64_t admitted_kv_bytes = 0;  // what its admission took (its rows and any shared prompt it was first to need)
  int32_t batch_rows = 0;         // BatchRowsOf(num_images)
  int64_t prompt_tokens = 0;      // prefilled tokens, all its batch rows
  absl::Duration progress_interval;
  absl::Time accepted;
  absl::Time admitted = absl::InfinitePast();
  absl::Time prefilled = absl::InfinitePast();
  absl::Time last_token = absl::InfinitePast();
  absl::Time last_progress = absl::InfinitePast();
  absl::Duration prefill_time;
  absl::Duration vq_time;
  engine::GroupId group = -1;
  int32_t decode_steps = 0;           // steps after its prefill step
  int32_t tokens_counted = 0;         // progress().tokens_done when the last step was counted
  int64_t decode_batch_rows_sum = 0;  // the engine's decode batch rows, summed over its decode steps
  int32_t images_sent = 0;
  Priority priority = Priority::kNormal;
  int64_t sequence = 0;                     // acceptance order
  ImageEncoder encoder;                     // empty: the scheduler's
  std::vector<int32_t> preview_token_rows;  // token rows each preview shows (loop thread)
  size_t next_preview = 0;                  // loop thread
  std::atomic<bool> preview_in_flight{false};
  absl::Mutex deliver_mu;  // orders previews before the final images
  bool images_started ABSL_GUARDED_BY(deliver_mu) = false;
};

using JobPtr = std::shared_ptr<Job>;

}  // namespace argen::scheduler
