// OUT/manifest.jsonl: one JSON object a line per written image, so the
// report scores exactly what this sweep wrote (never stale files) and knows
// each image's prompt, configuration and seed. Lines are flushed one by one:
// a sweep that is killed leaves a valid manifest of what it finished.
#pragma once

#include <cstdint>
#include <fstream>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace argen::sweep {

struct ManifestEntry {
  int32_t prompt_index = 0;
  std::string tag;
  std::string prompt;
  int32_t class_id = -1;  // a class-conditional model's class (the prompt is then a label only); -1: none
  std::string policy;
  double sparsity = 0;  // percent
  std::string config;   // "<policy>_<sparsity>", the folder
  uint64_t seed = 0;    // the request's seed; image i draws from stream (seed, i)
  int32_t image = 0;
  std::string path;     // relative to the manifest's folder
  double decode_s = 0;  // wall seconds from Add to the last token (shared with the batch)
};

// "<prompt index, 4 digits>_<image>.png": the names tools/scorer/score_dir.py reads.
std::string ImageFileName(int32_t prompt_index, int32_t image);

std::string ToJsonLine(const ManifestEntry& e);
absl::StatusOr<ManifestEntry> ParseManifestLine(const std::string& line);

// Every entry of an existing manifest; errors name the file and line.
absl::StatusOr<std::vector<ManifestEntry>> ReadManifest(const std::string& path);

// Appends lines; thread-safe.
class ManifestWriter {
 public:
  // append == false truncates the file.
  static absl::StatusOr<std::unique_ptr<ManifestWriter>> Open(const std::string& path, bool append);
  absl::Status Write(const ManifestEntry& entry);

 private:
  ManifestWriter(std::string path, std::ofstream out) : path_(std::move(path)), out_(std::move(out)) {}
  std::string path_;
  std::mutex mu_;
  std::ofstream out_;
};

}  // namespace argen::sweep
