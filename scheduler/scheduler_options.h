// Limits and knobs of the continuous-batching scheduler.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "engine/engine.h"

namespace argen::scheduler {

// Turns one decoded image into the bytes sent to the client (PNG in the
// server). Called on the image worker threads, never on the decode loop.
using ImageEncoder = std::function<absl::StatusOr<std::string>(const engine::RgbImage&)>;

// The KV budget and the batch cap are the engine's (engine::ModelInfo): the
// scheduler admits by them and never keeps a copy that could disagree.
struct SchedulerOptions {
  int32_t queue_limit = 64;                                    // requests waiting (not yet admitted); > 0
  absl::Duration progress_interval = absl::Milliseconds(250);  // default per request
  int32_t image_workers = 1;                                   // threads for VQ decode + image encoding
  // A queued request rises one priority level per this much waiting
  // (scheduler/priority.h); > 0.
  absl::Duration priority_aging = absl::Seconds(10);
  // Called once (on the loop thread) when a step fails with a fatal device
  // error (engine/device_errors.h): everything held has then been failed and
  // new requests are refused; the owner should stop the process.
  std::function<void(const absl::Status&)> on_fatal_error;
  // Prompt tokens (all rows) one step may prefill. Admission stops at this
  // bound, so a step that prefills stays within a small factor of a decode
  // step and a saturating load joins the batch as rows free instead of in
  // waves; a request is always admitted when nothing else is prefilled in
  // that step (a larger one still runs). 0: no bound.
  int64_t max_prefill_tokens = 0;
  // Most images one Engine::DecodeImages call takes: the images of the
  // requests that finished are decoded together, across requests, on an
  // image worker; >= 1.
  int32_t max_decode_batch = 64;
};

}  // namespace argen::scheduler
