// The image path beside the step loop: batched VQ decode, image encoding
// (PNG in the server), delivery of the images in order, and previews.
//
// Requests whose last token was sampled queue here in finishing order; an
// image worker (TaskWorkers) takes the queued ones, up to max_decode_batch
// images (at least one request), decodes all their images in one
// Engine::DecodeImages call, then each request's images are encoded and
// pushed in order and the request is finished. Previews (scheduler/preview.h)
// are decoded and encoded on the same workers; the loop only hands over a
// copy of the sampled tokens, and a preview is dropped rather than queued when
// the workers or the client are behind, or when the final images have
// started (every preview comes before the first image).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "engine/engine.h"
#include "scheduler/job.h"
#include "scheduler/scheduler_observer.h"
#include "scheduler/scheduler_options.h"
#include "scheduler/task_workers.h"

namespace argen::scheduler {

class ImagePipeline {
 public:
  // How a request ends, which the scheduler owns. Both are called on the
  // image workers.
  struct RequestEnds {
    std::function<absl::Status(const Job&)> stop_reason;  // why it must end now, or OK
    std::function<void(Job&, absl::Status)> finish;       // its Finished event, once
  };

  // `engine` and `observer` must outlive it; `encoder` is the default one
  // (a request's own encoder, when set, is used instead).
  ImagePipeline(engine::Engine* engine, const SchedulerOptions& options, ImageEncoder encoder,
                SchedulerObserver* observer, RequestEnds ends);
  // Runs the tasks still queued (each ends at once when stop_reason says so), then joins.
  ~ImagePipeline();
  ImagePipeline(const ImagePipeline&) = delete;
  ImagePipeline& operator=(const ImagePipeline&) = delete;

  // Loop thread: queues requests whose last token was sampled (their tokens
  // are in their request objects, engine::Request) for their VQ decode.
  void DecodeFinished(std::vector<JobPtr> jobs);
  // Loop thread: hands each running request's next due preview to the
  // workers (a copy of the request object's tokens so far), or drops it.
  void OfferPreviews(const std::vector<JobPtr>& running);

 private:
  // Takes the queued requests (up to max_decode_batch images, at least one
  // request), decodes their images in one DecodeImages call and posts each
  // request's encoding.
  void DecodeQueued();
  // Encodes a request's decoded images, pushes them in order, finishes it.
  void EncodeAndDeliver(const JobPtr& job, std::vector<engine::RgbImage> rgb, absl::Duration decode_time);
  // Preview `index` of `job`, showing its first `token_rows` token rows.
  void DecodePreview(const JobPtr& job, int32_t index, int32_t token_rows, std::vector<std::vector<int32_t>> sampled);
  const ImageEncoder& EncoderOf(const Job& job) const { return job.encoder ? job.encoder : encoder_; }

  engine::Engine* const engine_;
  const int32_t image_workers_;
  const int32_t max_decode_batch_;
  const ImageEncoder encoder_;
  SchedulerObserver* const observer_;
  const RequestEnds ends_;

  // Finished requests waiting for their VQ decode, in finishing order.
  absl::Mutex decode_mu_;
  std::deque<JobPtr> decode_queue_ ABSL_GUARDED_BY(decode_mu_);
  std::unique_ptr<TaskWorkers> workers_;
};

}  // namespace argen::scheduler
