// Where a backend's weights come from, in host memory: f32 data of the
// tensors a ModelSpec names (engine/model/model_spec.h), from a checkpoint
// or made up for benchmarks. Each device converts them into its own layout
// (engine/cpu: f32 with fused projections; engine/cuda: bf16 on the device),
// so no backend reads another backend's weights.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/model/model_spec.h"

namespace argen::model {

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  // The used rows of `t` as f32, row-major [used_rows x row_elements]. Errors
  // name the tensor and its file. Safe to call from several threads.
  virtual absl::StatusOr<std::vector<float>> Load(const TensorRef& t) const = 0;
  // Rows `ids` (already range-checked) of the 2-D tensor `t` into out[n x row_elements].
  virtual absl::Status ReadRows(const TensorRef& t, const int32_t* ids, int64_t n, float* out) const = 0;
};

// Reads the checkpoint's tensors (memory-mapped; converted to f32 on demand).
std::shared_ptr<const WeightSource> CheckpointWeights(std::shared_ptr<const checkpoint::Checkpoint> checkpoint);

// Made-up weights of the right shapes (benchmarks): kMatrix and kBias
// tensors uniform with standard deviation `scale`, a pure function of
// (seed, name, index); kOne 1, kZero 0; embedding rows hashed from (id, column).
std::shared_ptr<const WeightSource> RandomWeights(uint64_t seed, float scale);

// Every tensor of `spec` exists in `checkpoint` with its shape (the one
// tensor map validates before anything is loaded). Touches no tensor data;
// errors name the tensor, its file, the expected and the actual shape.
absl::Status ValidateTensors(const checkpoint::Checkpoint& checkpoint, const ModelSpec& spec);

}  // namespace argen::model
