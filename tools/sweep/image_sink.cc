#include "tools/sweep/image_sink.h"

#include <algorithm>
#include <filesystem>

#include "absl/strings/str_cat.h"

namespace argen::sweep {

int32_t DefaultImageThreads() {
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 1 ? static_cast<int32_t>(hw) - 1 : 1;
}

ImageSink::ImageSink(engine::Engine& engine, ManifestWriter& manifest, SinkOptions options)
    : engine_(engine), manifest_(manifest), options_([&] {
        options.threads = std::max(1, options.threads);
        options.decode_batch = std::max(1, options.decode_batch);
        if (options.max_queued <= 0) options.max_queued = 4 * options.threads * options.decode_batch;
        return options;
      }()) {
  for (int32_t i = 0; i < options_.threads; ++i) workers_.emplace_back([this] { Loop(); });
}

ImageSink::~ImageSink() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void ImageSink::Submit(FinishedGroup group) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    space_cv_.wait(lock, [this] {
      return static_cast<int32_t>(queue_.size()) < options_.max_queued || !status_.ok();
    });
    queue_.push_back({next_seq_++, std::move(group)});
    peak_queued_ = std::max<int64_t>(peak_queued_, static_cast<int64_t>(queue_.size()));
  }
  work_cv_.notify_one();
}

absl::Status ImageSink::status() {
  std::lock_guard<std::mutex> lock(mu_);
  return status_;
}

int64_t ImageSink::images_written() {
  std::lock_guard<std::mutex> lock(mu_);
  return images_written_;
}

int64_t ImageSink::peak_queued() {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_queued_;
}

absl::Status ImageSink::Finish() {
  std::unique_lock<std::mutex> lock(mu_);
  space_cv_.wait(lock, [this] { return queue_.empty() && busy_ == 0; });
  return status_;
}

void ImageSink::FlushInOrderLocked() {
  while (status_.ok()) {
    auto it = ready_.find(next_manifest_);
    if (it == ready_.end()) return;
    for (const ManifestEntry& e : it->second) {
      if (absl::Status s = manifest_.Write(e); !s.ok()) {
        status_ = s;
        return;
      }
      ++images_written_;
    }
    ready_.erase(it);
    ++next_manifest_;
  }
}

void ImageSink::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    work_cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left
    std::vector<Job> jobs;
    while (!queue_.empty() && static_cast<int32_t>(jobs.size()) < options_.decode_batch) {
      jobs.push_back(std::move(queue_.front()));
      queue_.pop_front();
    }
    ++busy_;
    const bool failed = !status_.ok();
    lock.unlock();
    space_cv_.notify_all();
    // After a failure the rest is dropped: the sweep is stopping anyway.
    std::vector<std::vector<ManifestEntry>> entries;
    const absl::Status s = failed ? absl::OkStatus() : Write(jobs, &entries);
    lock.lock();
    if (status_.ok() && !s.ok()) status_ = s;
    if (!failed && s.ok()) {
      for (size_t j = 0; j < jobs.size(); ++j) ready_[jobs[j].seq] = std::move(entries[j]);
      FlushInOrderLocked();
    }
    --busy_;
    space_cv_.notify_all();
  }
}

absl::Status ImageSink::Write(std::vector<Job>& jobs, std::vector<std::vector<ManifestEntry>>* entries) {
  std::vector<std::vector<int32_t>> grids;
  for (Job& job : jobs) {
    for (std::vector<int32_t>& t : job.group.tokens) grids.push_back(std::move(t));
  }
  absl::StatusOr<std::vector<engine::RgbImage>> images = engine_.DecodeImages(grids);
  if (!images.ok()) return images.status();
  if (images->size() != grids.size()) {
    return absl::InternalError(
        absl::StrCat("DecodeImages returned ", images->size(), " images for ", grids.size(), " token grids"));
  }
  size_t next = 0;
  entries->assign(jobs.size(), {});
  for (size_t j = 0; j < jobs.size(); ++j) {
    const FinishedGroup& group = jobs[j].group;
    const std::filesystem::path folder(group.folder);
    for (size_t i = 0; i < group.tokens.size(); ++i) {
      ManifestEntry entry = group.entry;
      entry.image = static_cast<int32_t>(i);
      const std::string name = ImageFileName(entry.prompt_index, entry.image);
      entry.path = (std::filesystem::path(entry.config) / name).string();
      const engine::RgbImage& img = (*images)[next++];
      if (absl::Status s = image::WritePngFile((folder / name).string(), img.rgb, img.width, img.height, options_.png);
          !s.ok()) {
        return s;
      }
      (*entries)[j].push_back(std::move(entry));
    }
  }
  return absl::OkStatus();
}

}  // namespace argen::sweep
