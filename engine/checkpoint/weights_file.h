// One weights file of either readable format, chosen by content: a
// safetensors file or a torch.save zip checkpoint (torch_file.h). Checkpoint
// (checkpoint.h) is built from these; argen_convert reads them directly.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/checkpoint/checkpoint.h"

namespace argen::checkpoint {

class WeightsFile {
 public:
  virtual ~WeightsFile() = default;
  virtual const std::string& path() const = 0;
  virtual size_t size() const = 0;
  virtual const std::string& name(size_t i) const = 0;
  // For the Checkpoint API (see Checkpoint::Find).
  virtual absl::StatusOr<const TensorInfo*> Tensor(size_t i) const = 0;

  // A tensor as stored, for re-writing it: row-major bytes (in place, or in *scratch).
  struct Raw {
    std::string dtype;  // safetensors spelling: F32, F16, BF16, F64, I64, ..., BOOL
    std::vector<int64_t> shape;
    std::string_view bytes;
  };
  virtual absl::StatusOr<Raw> RawTensor(size_t i, std::string* scratch) const = 0;
  // dtype and shape only (bytes empty): reads no tensor data.
  virtual Raw RawInfo(size_t i) const = 0;
  // What was in the file but not read as a tensor (e.g. a Lightning checkpoint's optimizer states).
  virtual std::vector<std::string> Skipped() const { return {}; }
};

// By content: safetensors, or a torch.save archive (legacy torch formats are refused with a message).
absl::StatusOr<std::unique_ptr<WeightsFile>> OpenWeightsFile(const std::string& path);

// The weights files of a model directory, in the layout and order
// Checkpoint::Open reads (index checked, names unique across shards).
absl::StatusOr<std::vector<std::unique_ptr<WeightsFile>>> OpenModelWeights(const std::string& dir);

// A Checkpoint over one weights file of any name (model.safetensors, a
// Lightning vqgan.ckpt, ...); dir() is the file's directory.
absl::StatusOr<std::unique_ptr<Checkpoint>> OpenCheckpointFile(const std::string& path);

}  // namespace argen::checkpoint
