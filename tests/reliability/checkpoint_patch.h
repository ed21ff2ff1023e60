// Test checkpoints with broken weights: a copy of a checkpoint directory with
// one tensor's values rewritten in place (F32, F16 and BF16 supported).
#pragma once

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace argen::reliability_test {

// Copies `dir` to `out_dir` (replacing it).
absl::Status CopyCheckpoint(const std::string& dir, const std::string& out_dir);

// Sets every element i of tensor `name` in `safetensors_file` to value(i, old).
absl::Status PatchTensor(const std::string& safetensors_file, const std::string& name,
                         const std::function<float(int64_t, float)>& value);

}  // namespace argen::reliability_test
