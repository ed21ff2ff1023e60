// CreateCpuBackend (engine/model/backend_registry.h).
#include "engine/cpu/cpu_backend.h"
#include "engine/model/backend_registry.h"
#include "engine/model/fault_guard.h"

namespace argen::model {

absl::StatusOr<std::unique_ptr<Backend>> CreateCpuBackend(const ModelSpec& spec,
                                                          std::shared_ptr<const WeightSource> weights,
                                                          const BackendOptions& options) {
  if (absl::Status s = CheckSpec(spec); !s.ok()) return s;
  if (absl::Status s = CheckTokenHead(spec, options.token_head.get()); !s.ok()) return s;
  absl::StatusOr<FaultPlan> faults = FaultPlanFromEnv();  // testing only (fault_guard.h)
  if (!faults.ok()) return faults.status();
  absl::StatusOr<cpu::CpuWeights> loaded = cpu::LoadCpuWeights(spec, std::move(weights), options.weight_format);
  if (!loaded.ok()) return loaded.status();
  return WithFaultGuard(std::unique_ptr<Backend>(new cpu::CpuBackend(spec, *std::move(loaded), options)),
                        *std::move(faults), FaultHooks{});
}

}  // namespace argen::model
