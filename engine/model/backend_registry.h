// Backend constructors CreateEngine picks from by EngineOptions::backend.
// CreateCpuBackend is defined in engine/cpu (target argen_cpu).
// CreateCudaBackend is declared here and defined in engine/cuda (target
// argen_cuda) when the project is built with CUDA; the factory links it and
// compiles the "cuda" choice in only when that target exists (ARGEN_WITH_CUDA).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/model/backend.h"

namespace argen::model {

// The backend may keep the checkpoint (e.g. to read embedding rows lazily).
absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(
    std::shared_ptr<const checkpoint::Checkpoint> checkpoint, const ModelDims& dims,
    const BackendOptions& options);

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(
    std::shared_ptr<const checkpoint::Checkpoint> checkpoint, const ModelDims& dims,
    const BackendOptions& options);

}  // namespace argen::model
