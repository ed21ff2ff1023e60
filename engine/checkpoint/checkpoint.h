// A checkpoint directory as the hub publishes it: config.json, weights as
// model.safetensors or shards with model.safetensors.index.json, or as
// torch.save files (pytorch_model.bin or shards with
// pytorch_model.bin.index.json, read without Python: torch_file.h), and
// tokenizer.json. Tensors are memory-mapped and converted to f32 only when a
// backend asks for them, so modules generation never uses (vision_model,
// aligner, lm_head) cost nothing. One file of any name: weights_file.h.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace argen::checkpoint {

enum class DType { kF32, kF16, kBF16 };

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;  // into the mapped file
  size_t nbytes = 0;
  std::string file;  // which weights file holds it (for messages)
};

class Checkpoint {
 public:
  virtual ~Checkpoint() = default;
  // Errors name the file (and tensor) at fault.
  static absl::StatusOr<std::unique_ptr<Checkpoint>> Open(const std::string& dir);

  virtual const std::string& dir() const = 0;
  virtual bool Has(std::string_view name) const = 0;
  virtual absl::StatusOr<const TensorInfo*> Find(std::string_view name) const = 0;
  // Checks the shape (error names tensor, expected and actual shape), converts to f32.
  virtual absl::StatusOr<std::vector<float>> LoadF32(std::string_view name,
                                                     const std::vector<int64_t>& shape) const = 0;
  // Converts selected rows of a 2-D tensor to f32 (embedding lookups without materialising the table).
  virtual absl::Status ReadRowsF32(std::string_view name, const int32_t* rows, int64_t n_rows, float* out) const = 0;
};

}  // namespace argen::checkpoint
