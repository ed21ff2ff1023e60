// Backend constructors CreateEngine picks from by EngineOptions::backend: a
// ModelSpec (what to run) and a WeightSource (where its tensors come from).
// CreateCpuBackend is defined in engine/cpu (target argen_cpu).
// CreateCudaBackend is declared here and defined in engine/cuda (target
// argen_cuda) when the project is built with CUDA; the factory links it and
// compiles the "cuda" choice in only when that target exists (ARGEN_WITH_CUDA).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "engine/model/backend.h"
#include "engine/model/model_spec.h"
#include "engine/model/weight_source.h"

namespace argen::model {

// The backend may keep `weights` (e.g. to read embedding rows lazily).
absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const ModelSpec& spec,
                                                          std::shared_ptr<const WeightSource> weights,
                                                          const BackendOptions& options);

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const ModelSpec& spec,
                                                           std::shared_ptr<const WeightSource> weights,
                                                           const BackendOptions& options);

}  // namespace argen::model
