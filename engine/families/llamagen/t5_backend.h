// Where LlamaGen t2i's T5 encoder runs (family option t5_backend): by default
// on the engine's own device (backend cuda: the GPU, cpu: the host); an
// explicit "cpu" or "cuda" wins over the backend.
#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace argen::llamagen {

enum class T5Backend { kFollowEngine, kCpu, kCuda };

// The option's value: "" (absent) follows the engine's backend, "cpu" or
// "cuda" are explicit; anything else is InvalidArgument naming the option.
absl::StatusOr<T5Backend> ParseT5Backend(const std::string& option);

// Whether the encoder runs on the GPU, given the engine's backend
// (engine_on_gpu: backend "cuda").
bool T5RunsOnGpu(T5Backend backend, bool engine_on_gpu);

}  // namespace argen::llamagen
