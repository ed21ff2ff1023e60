// Decodes finished groups' tokens to images and writes PNGs plus manifest
// lines on a worker thread, so the VQ decoder (CPU) overlaps with the next
// decode steps of the running batch. Engine::DecodeImages is thread-safe.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "engine/engine.h"
#include "tools/sweep/manifest.h"

namespace argen::sweep {

struct FinishedGroup {
  std::vector<std::vector<int32_t>> tokens;  // [image][token]
  ManifestEntry entry;                       // image and path are filled per image
  std::string folder;                        // absolute-or-cwd-relative folder of the PNGs
};

class ImageSink {
 public:
  ImageSink(engine::Engine& engine, ManifestWriter& manifest);
  ~ImageSink();  // waits for the queue

  void Submit(FinishedGroup group);
  // The first error so far (decode, PNG or manifest); OK otherwise.
  absl::Status status();
  // Waits until every submitted group is written; returns status().
  absl::Status Finish();
  int64_t images_written();

 private:
  void Loop();
  absl::Status Write(const FinishedGroup& group);

  engine::Engine& engine_;
  ManifestWriter& manifest_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<FinishedGroup> queue_;
  bool busy_ = false, stop_ = false;
  absl::Status status_;
  int64_t images_written_ = 0;
  std::thread worker_;
};

}  // namespace argen::sweep
