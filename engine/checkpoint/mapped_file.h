// A read-only memory mapping of a whole file. Weights stay on disk until a
// backend touches them, so a checkpoint costs only address space when opened.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace argen::checkpoint {

class MappedFile {
 public:
  // Errors name the path and the failing system call.
  static absl::StatusOr<std::unique_ptr<MappedFile>> Open(const std::string& path);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const std::string& path() const { return path_; }
  const unsigned char* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  MappedFile(std::string path, const unsigned char* data, size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}

  std::string path_;
  const unsigned char* data_;  // nullptr for an empty file
  size_t size_;
};

}  // namespace argen::checkpoint
