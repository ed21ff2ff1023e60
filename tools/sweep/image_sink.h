// Writes finished groups' PNGs and manifest lines. The batch runner's worker
// threads (tools/runner/batch_runner.h) VQ-decode finished groups and call
// Write, so the decoder and the PNG encoder overlap with the next decode
// steps of the running batch.
//
// - Thread-safe: groups' PNGs are encoded at once on the callers' threads.
// - Deterministic manifest: lines are written in finishing order
//   (FinishedGroup::sequence, 0, 1, ...): a group's lines wait for every
//   earlier group's, whatever order the workers finish in.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/engine.h"
#include "engine/image/png.h"
#include "tools/sweep/manifest.h"
#include "tools/sweep/output_format.h"
#include "tools/sweep/prompt_set.h"

namespace argen::sweep {

struct FinishedGroup {
  int64_t sequence = 0;                     // finishing order of the group in the run
  std::vector<engine::RgbImage> images;     // [image]
  ManifestEntry entry;                      // image and path are filled per image
  std::string folder;                       // absolute-or-cwd-relative folder of the configuration
  const BenchmarkPrompt* prompt = nullptr;  // names the files (output_format.h)
};

struct SinkOptions {
  int32_t threads = 1;       // worker threads that decode and write (>= 1)
  int32_t max_queued = 0;    // groups waiting for a worker before stepping blocks; 0: 4 x threads x decode_batch
  int32_t decode_batch = 8;  // groups decoded in one DecodeImages call (>= 1)
  image::PngOptions png;
  OutputFormat format = OutputFormat::kDefault;  // the files' layout
};

// Writer threads for --image-threads 0: the hardware threads less one (the
// engine's stepping thread), at least 1.
int32_t DefaultImageThreads();

class ImageSink {
 public:
  ImageSink(ManifestWriter& manifest, image::PngOptions png = {}, OutputFormat format = OutputFormat::kDefault);

  // Writes the group's PNGs, then the manifest lines of every group whose
  // turn has come. The first error (PNG or manifest) is returned by this and
  // every later call.
  absl::Status Write(const FinishedGroup& group);
  int64_t images_written();
  // Groups written whose manifest lines still wait for an earlier group's.
  int64_t waiting();

 private:
  // Writes the manifest lines of every written group that is next in order. Holds mu_.
  void FlushInOrderLocked();

  ManifestWriter& manifest_;
  const image::PngOptions png_;
  const OutputFormat format_;
  std::mutex mu_;
  int64_t next_manifest_ = 0;                            // sequence whose lines are written next
  std::map<int64_t, std::vector<ManifestEntry>> ready_;  // written PNGs waiting for their turn
  absl::Status status_;
  int64_t images_written_ = 0;
};

}  // namespace argen::sweep
