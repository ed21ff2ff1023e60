// Writes received images into the output folder: each as soon as it arrives
// (a late error or Ctrl-C keeps what came), atomically (a temporary file
// renamed into place, so no half-written PNG is ever left under the final
// name), never over an existing file unless asked, and under a file name made
// from the request id with anything but [A-Za-z0-9_-] replaced, so an id like
// "../x" cannot write outside the folder. The folder is created at the first
// image: a failed run leaves no empty folder behind.
#pragma once

#include <filesystem>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace argen::client {

class ImageWriter {
 public:
  ImageWriter(std::filesystem::path dir, bool overwrite) : dir_(std::move(dir)), overwrite_(overwrite) {}

  // --output FILE: a request's one image goes to `file` itself; with
  // `count` > 1 image i goes to <stem>_<i><ext> beside it (argen_generate's rule).
  struct OutputFile {
    std::filesystem::path file;
    int count = 1;
  };
  ImageWriter(const OutputFile& output, bool overwrite);

  // The file stem for a request id: [A-Za-z0-9_-] kept, every other byte '_'
  // ("../escaped" -> "___escaped"), at most 128 characters; "image" for "".
  static std::string SafeStem(std::string_view request_id);

  // <dir>/<SafeStem(id)>_<index>.png, or the --output file (ToFile).
  std::filesystem::path PathFor(std::string_view request_id, int index) const;

  // Before any request is sent: the folder (or the nearest existing parent,
  // where it will be created) is a writable directory.
  absl::Status CheckWritable() const;

  // Before a request with a known id is sent: none of its `count` files exist
  // (unless overwriting). AlreadyExists names the first one.
  absl::Status CheckFree(std::string_view request_id, int count) const;

  // Thread-safe. The written path; AlreadyExists without --overwrite.
  absl::StatusOr<std::filesystem::path> Write(std::string_view request_id, int index, std::string_view png);

 private:
  const std::filesystem::path dir_;
  const bool overwrite_;
  const std::filesystem::path file_;  // --output: the file; empty: names from request ids
  const int file_count_ = 1;
  std::mutex mu_;
  int temp_counter_ = 0;
};

}  // namespace argen::client
