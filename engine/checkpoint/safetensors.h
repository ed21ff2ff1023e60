// One .safetensors file, memory-mapped: an 8-byte little-endian header
// length, a JSON header {name: {dtype, shape, data_offsets}}, then the data.
// Opening validates the whole header (dtype, shape vs byte size, offsets
// inside the file) so later reads never need to check again. BatchNorm's
// I64 num_batches_tracked counters are left out (never read); any other
// dtype but F32, F16 and BF16 is refused.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/mapped_file.h"

namespace argen::checkpoint {

class SafetensorsFile {
 public:
  // Errors name the file and, where one is at fault, the tensor.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);

  const std::string& path() const { return file_->path(); }
  // In header order; TensorInfo::data points into the mapping owned here.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }

 private:
  SafetensorsFile(std::unique_ptr<MappedFile> file, std::vector<TensorInfo> tensors)
      : file_(std::move(file)), tensors_(std::move(tensors)) {}

  std::unique_ptr<MappedFile> file_;
  std::vector<TensorInfo> tensors_;
};

}  // namespace argen::checkpoint
