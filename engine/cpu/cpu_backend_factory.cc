// CreateCpuBackend (engine/model/backend_registry.h).
#include "engine/cpu/cpu_backend.h"
#include "engine/model/backend_registry.h"

namespace argen::model {

absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(
    std::shared_ptr<const checkpoint::Checkpoint> checkpoint, const ModelDims& dims,
    const BackendOptions& options) {
  absl::StatusOr<cpu::CpuWeights> weights = cpu::LoadCpuWeights(std::move(checkpoint), dims);
  if (!weights.ok()) return weights.status();
  return std::unique_ptr<Backend>(new cpu::CpuBackend(dims, *std::move(weights), options));
}

}  // namespace argen::model
