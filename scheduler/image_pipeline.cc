#include "scheduler/image_pipeline.h"

#include <iterator>
#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/token_vectors.h"
#include "scheduler/preview.h"
#include "scheduler/request_events.h"

namespace argen::scheduler {

ImagePipeline::ImagePipeline(engine::Engine* engine, const SchedulerOptions& options, ImageEncoder encoder,
                             SchedulerObserver* observer, RequestEnds ends)
    : engine_(engine),
      image_workers_(options.image_workers),
      max_decode_batch_(options.max_decode_batch),
      encoder_(std::move(encoder)),
      observer_(observer),
      ends_(std::move(ends)),
      workers_(std::make_unique<TaskWorkers>(options.image_workers)) {}

ImagePipeline::~ImagePipeline() {
  workers_.reset();  // its tasks use the decode queue: they run before it goes
}

void ImagePipeline::DecodeFinished(std::vector<JobPtr> jobs) {
  if (jobs.empty()) return;
  {
    absl::MutexLock lock(&decode_mu_);
    for (JobPtr& job : jobs) decode_queue_.push_back(std::move(job));
  }
  // One task per request: each takes whatever is queued when it runs (the
  // first takes a batch, later ones may find it gone), so a decode never
  // waits for a batch to fill.
  for (size_t i = 0; i < jobs.size(); ++i) workers_->Post([this] { DecodeQueued(); });
}

void ImagePipeline::OfferPreviews(const std::vector<JobPtr>& running) {
  for (const JobPtr& job : running) {
    // Decode tokens per token row of its size: the grid's width and its row
    // breaks (Lumina-mGPT), else a square grid's side.
    const int32_t tokens_per_token_row = TokensPerRow(job->layout());
    if (job->next_preview >= job->preview_token_rows.size()) continue;
    const int32_t token_rows = job->preview_token_rows[job->next_preview];
    if (job->progress().tokens_done < token_rows * tokens_per_token_row) continue;
    const int32_t index = static_cast<int32_t>(job->next_preview++);
    const int32_t images = job->prepared().request.num_images;
    // Dropped, never queued: the previous preview is still being decoded, the
    // image workers are all busy (final images first), or the client has not
    // taken the previous preview yet.
    const char* drop = nullptr;
    if (job->preview_in_flight.load(std::memory_order_acquire) || workers_->pending() >= image_workers_) {
      drop = "image_path_busy";
    } else if (job->handle->pending_previews() > 0) {
      drop = "client_slow";
    }
    if (drop != nullptr) {
      for (int32_t i = 0; i < images; ++i) observer_->OnPreviewDropped(drop);
      continue;
    }
    job->preview_in_flight.store(true, std::memory_order_release);
    // A copy of the tokens so far (the engine appends to the request's own at
    // the next step, on this thread, while a worker decodes the copy).
    workers_->Post([this, job, index, token_rows, sampled = job->progress().tokens]() mutable {
      DecodePreview(job, index, token_rows, std::move(sampled));
    });
  }
}

void ImagePipeline::DecodePreview(const JobPtr& job, int32_t index, int32_t token_rows,
                                  std::vector<std::vector<int32_t>> sampled) {
  const engine::ImageLayout& layout = job->layout();  // the request's size
  const bool has_width = layout.grid.width > 0;
  const int32_t width = has_width ? layout.grid.width : layout.grid_w;
  const int32_t row_break = has_width ? layout.grid.row_break_tokens : 0;
  const int32_t grid_token_rows = TokenRows(layout);
  const int32_t images = static_cast<int32_t>(sampled.size());
  auto drop_all = [&](const char* reason) {
    for (int32_t i = 0; i < images; ++i) observer_->OnPreviewDropped(reason);
    job->preview_in_flight.store(false, std::memory_order_release);
  };
  if (!ends_.stop_reason(*job).ok()) return drop_all("request_ended");
  // A continuous-token model's tokens are token_dim words each (engine/token_vectors.h).
  const int32_t token_dim = engine_->info().token_dim;
  const bool vectors = engine::MakesContinuousTokens(engine_->info());
  std::vector<std::vector<int32_t>> grids;
  for (const std::vector<int32_t>& tokens : sampled) {
    absl::StatusOr<std::vector<int32_t>> g =
        vectors ? PreviewTokenVectors(tokens, token_rows, width, grid_token_rows, token_dim)
                : PreviewTokens(tokens, token_rows, width, row_break, grid_token_rows);
    if (!g.ok()) return drop_all("failed");
    grids.push_back(*std::move(g));
  }
  absl::StatusOr<std::vector<engine::RgbImage>> rgb = engine_->DecodeImages(grids);
  if (!rgb.ok() || static_cast<int32_t>(rgb->size()) != images) return drop_all("failed");
  const ImageEncoder& encode = EncoderOf(*job);
  std::vector<PreviewEvent> events;
  for (int32_t i = 0; i < images; ++i) {
    engine::RgbImage& image = (*rgb)[i];
    PaintUnsampledRows(image, token_rows, grid_token_rows);
    absl::StatusOr<std::string> encoded = encode(image);
    if (!encoded.ok()) return drop_all("failed");
    PreviewEvent e;
    e.index = index;
    e.image = i;
    e.rows_done = token_rows;
    e.tokens_done = token_rows * (width + row_break);
    e.width = image.width;
    e.height = image.height;
    e.encoded = *std::move(encoded);
    events.push_back(std::move(e));
  }
  bool late = false;
  {
    absl::MutexLock lock(&job->deliver_mu);
    late = job->images_started;
    if (!late) {
      for (PreviewEvent& e : events) job->handle->Push(std::move(e));
    }
  }
  if (late) return drop_all("late");
  job->preview_in_flight.store(false, std::memory_order_release);
}

void ImagePipeline::DecodeQueued() {
  std::vector<JobPtr> batch;
  {
    absl::MutexLock lock(&decode_mu_);
    int32_t images = 0;
    while (!decode_queue_.empty()) {
      const int32_t n = decode_queue_.front()->prepared().request.num_images;
      if (!batch.empty() && images + n > max_decode_batch_) break;
      images += n;
      batch.push_back(std::move(decode_queue_.front()));
      decode_queue_.pop_front();
    }
  }
  std::vector<JobPtr> live;
  std::vector<std::vector<int32_t>> grids;
  for (JobPtr& job : batch) {
    {
      absl::MutexLock lock(&job->deliver_mu);
      job->images_started = true;
    }
    if (absl::Status reason = ends_.stop_reason(*job); !reason.ok()) {
      ends_.finish(*job, std::move(reason));
      continue;
    }
    // The finished request's tokens (the engine is done with them): taken, not copied.
    for (std::vector<int32_t>& tokens : job->request->progress.tokens) grids.push_back(std::move(tokens));
    live.push_back(std::move(job));
  }
  if (live.empty()) return;
  const absl::Time start = absl::Now();
  absl::StatusOr<std::vector<engine::RgbImage>> rgb = engine_->DecodeImages(grids);
  const absl::Duration decode_time = absl::Now() - start;
  if (!rgb.ok() || rgb->size() != grids.size()) {
    const std::string why = rgb.ok() ? absl::StrCat("engine returned ", rgb->size(), " of ", grids.size(), " images")
                                     : std::string(rgb.status().message());
    for (const JobPtr& job : live) {
      ends_.finish(*job, absl::InternalError(absl::StrCat("VQ decode of image 0 failed: ", why)));
    }
    return;
  }
  size_t next = 0;
  for (const JobPtr& job : live) {
    const size_t n = static_cast<size_t>(job->prepared().request.num_images);
    std::vector<engine::RgbImage> mine(std::make_move_iterator(rgb->begin() + next),
                                       std::make_move_iterator(rgb->begin() + next + n));
    next += n;
    // The request waited for the whole call: its vq_decode counts all of it.
    workers_->Post([this, job, mine = std::move(mine), decode_time]() mutable {
      EncodeAndDeliver(job, std::move(mine), decode_time);
    });
  }
}

void ImagePipeline::EncodeAndDeliver(const JobPtr& job, std::vector<engine::RgbImage> rgb, absl::Duration decode_time) {
  const ImageEncoder& encode = EncoderOf(*job);
  job->vq_time += decode_time;
  for (size_t i = 0; i < rgb.size(); ++i) {
    if (absl::Status reason = ends_.stop_reason(*job); !reason.ok()) {
      ends_.finish(*job, std::move(reason));
      return;
    }
    const absl::Time start = absl::Now();
    absl::StatusOr<std::string> encoded = encode(rgb[i]);
    if (!encoded.ok()) {
      ends_.finish(*job,
                   absl::InternalError(absl::StrCat("encoding image ", i, " failed: ", encoded.status().message())));
      return;
    }
    job->vq_time += absl::Now() - start;
    ImageEvent event;
    event.index = static_cast<int32_t>(i);
    event.seed = job->prepared().request.sampling.seed;
    event.width = rgb[i].width;
    event.height = rgb[i].height;
    event.encoded = *std::move(encoded);
    job->handle->Push(std::move(event));
    ++job->images_sent;
    const absl::Duration since_accepted = absl::Now() - job->accepted;
    if (i == 0) observer_->OnFirstImage(job->policy_name, since_accepted);
    observer_->OnImage(job->policy_name, since_accepted);
  }
  // A cancel that came with the last image (e.g. its push overflowed the
  // stream buffer and was dropped) must not end as OK.
  if (job->handle->cancelled()) {
    ends_.finish(*job, job->handle->cancel_reason());
    return;
  }
  ends_.finish(*job, absl::OkStatus());
}

}  // namespace argen::scheduler
