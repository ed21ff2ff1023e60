#include "tools/sweep/image_sink.h"

#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"

namespace argen::sweep {

int32_t DefaultImageThreads() {
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 1 ? static_cast<int32_t>(hw) - 1 : 1;
}

ImageSink::ImageSink(ManifestWriter& manifest, image::PngOptions png, OutputFormat format)
    : manifest_(manifest), png_(png), format_(format) {}

int64_t ImageSink::images_written() {
  std::lock_guard<std::mutex> lock(mu_);
  return images_written_;
}

int64_t ImageSink::waiting() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(ready_.size());
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

absl::Status ImageSink::Write(const FinishedGroup& group) {
  if (absl::Status s =
          [&] {
            std::lock_guard<std::mutex> lock(mu_);
            return status_;
          }();
      !s.ok()) {
    return s;
  }
  // Without a prompt (a caller of the default layout) the entry's index names the files.
  BenchmarkPrompt named;
  named.index = group.entry.prompt_index;
  const BenchmarkPrompt& prompt = group.prompt != nullptr ? *group.prompt : named;
  absl::StatusOr<std::vector<std::string>> paths = WriteRequestFiles(format_, group.folder, prompt, group.images, png_);
  if (!paths.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    if (status_.ok()) status_ = paths.status();
    return paths.status();
  }
  std::vector<ManifestEntry> entries;
  for (size_t i = 0; i < group.images.size(); ++i) {
    ManifestEntry entry = group.entry;
    entry.image = static_cast<int32_t>(i);
    entry.path = (std::filesystem::path(entry.config) / (*paths)[i]).string();
    entries.push_back(std::move(entry));
  }
  std::lock_guard<std::mutex> lock(mu_);
  ready_[group.sequence] = std::move(entries);
  FlushInOrderLocked();
  return status_;
}

}  // namespace argen::sweep
