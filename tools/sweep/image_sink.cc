#include "tools/sweep/image_sink.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "engine/image/png.h"

namespace argen::sweep {

ImageSink::ImageSink(engine::Engine& engine, ManifestWriter& manifest)
    : engine_(engine), manifest_(manifest), worker_([this] { Loop(); }) {}

ImageSink::~ImageSink() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void ImageSink::Submit(FinishedGroup group) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(group));
  }
  cv_.notify_all();
}

absl::Status ImageSink::status() {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

int64_t ImageSink::images_written() {
  std::lock_guard<std::mutex> lock(mu_);
  return images_written_;
}

absl::Status ImageSink::Finish() {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return queue_.empty() && !busy_; });
  return status_;
}

void ImageSink::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left
    FinishedGroup group = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    const bool failed = !status_.ok();
    lock.unlock();
    // After a failure the rest is dropped: the sweep is stopping anyway.
    const absl::Status s = failed ? absl::OkStatus() : Write(group);
    lock.lock();
    if (status_.ok() && !s.ok()) status_ = s;
    if (s.ok() && !failed) images_written_ += static_cast<int64_t>(group.tokens.size());
    busy_ = false;
    cv_.notify_all();
  }
}

absl::Status ImageSink::Write(const FinishedGroup& group) {
  absl::StatusOr<std::vector<engine::RgbImage>> images = engine_.DecodeImages(group.tokens);
  if (!images.ok()) return images.status();
  const std::filesystem::path folder(group.folder);
  for (size_t i = 0; i < images->size(); ++i) {
    ManifestEntry entry = group.entry;
    entry.image = static_cast<int32_t>(i);
    const std::string name = ImageFileName(entry.prompt_index, entry.image);
    entry.path = (std::filesystem::path(entry.config) / name).string();
    const engine::RgbImage& img = (*images)[i];
    if (absl::Status s = image::WritePngFile((folder / name).string(), img.rgb, img.width, img.height);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = manifest_.Write(entry); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace argen::sweep
