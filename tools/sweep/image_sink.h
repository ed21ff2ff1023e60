// Decodes finished groups' tokens to images and writes PNGs plus manifest
// lines on a pool of writer threads, so the VQ decoder and the PNG encoder
// overlap with the next decode steps of the running batch.
//
// - Engine::DecodeImages is thread-safe (the CPU and GPU decoders serialise
//   internally), so one worker decodes while the others encode PNGs. A worker
//   takes up to `decode_batch` queued groups and decodes them in one call.
// - Bounded memory: at most `max_queued` groups wait; Submit blocks beyond
//   that, so a fast engine cannot make finished tokens pile up.
// - Deterministic manifest: lines are written in Submit order (a group's lines
//   wait for every earlier group's), whatever order the workers finish in.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "engine/engine.h"
#include "tools/sweep/manifest.h"
#include "engine/image/png.h"

namespace argen::sweep {

struct FinishedGroup {
  std::vector<std::vector<int32_t>> tokens;  // [image][token]
  ManifestEntry entry;                       // image and path are filled per image
  std::string folder;                        // absolute-or-cwd-relative folder of the PNGs
};

struct SinkOptions {
  int32_t threads = 1;       // writer threads (>= 1)
  int32_t max_queued = 0;    // groups waiting before Submit blocks; 0: 4 x threads x decode_batch
  int32_t decode_batch = 8;  // groups decoded in one DecodeImages call (>= 1)
  image::PngOptions png;
};

// Writer threads for --image-threads 0: the hardware threads less one (the
// engine's stepping thread), at least 1.
int32_t DefaultImageThreads();

class ImageSink {
 public:
  ImageSink(engine::Engine& engine, ManifestWriter& manifest, SinkOptions options = {});
  ~ImageSink();  // waits for the queue

  // Blocks while max_queued groups wait (returns at once after a failure).
  void Submit(FinishedGroup group);
  // The first error so far (decode, PNG or manifest); OK otherwise.
  absl::Status status();
  // Waits until every submitted group is written; returns status().
  absl::Status Finish();
  int64_t images_written();
  // Most groups ever waiting at once (for tests of the bound).
  int64_t peak_queued();

 private:
  struct Job {
    int64_t seq = 0;
    FinishedGroup group;
  };
  void Loop();
  // Decodes and writes the PNGs of `jobs`; fills the manifest entries per job.
  absl::Status Write(std::vector<Job>& jobs, std::vector<std::vector<ManifestEntry>>* entries);
  // Writes the manifest lines of every finished group that is next in order. Holds mu_.
  void FlushInOrderLocked();

  engine::Engine& engine_;
  ManifestWriter& manifest_;
  const SinkOptions options_;
  std::mutex mu_;
  std::condition_variable work_cv_;   // workers: a job or stop
  std::condition_variable space_cv_;  // Submit: room in the queue; Finish: all done
  std::deque<Job> queue_;
  int64_t next_seq_ = 0;       // of the next Submit
  int64_t next_manifest_ = 0;  // seq whose lines are written next
  std::map<int64_t, std::vector<ManifestEntry>> ready_;  // written PNGs waiting for their turn
  int32_t busy_ = 0;
  bool stop_ = false;
  absl::Status status_;
  int64_t images_written_ = 0;
  int64_t peak_queued_ = 0;
  std::vector<std::thread> workers_;
};

}  // namespace argen::sweep
