// CreateCudaBackend (engine/model/backend_registry.h): the spec's tensors from
// the weight source -> bf16 (or the layers in fp8) on the device, one tensor at a time.
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/device_memory.h"
#include "engine/model/backend_registry.h"
#include "engine/model/fault_guard.h"

namespace argen::model {
namespace {

// The parts of the spec contract this backend does not run yet: refused
// before any device work, naming what is missing.
absl::Status CheckCudaSupports(const ModelSpec& spec) {
  if (spec.vector_tokens()) {
    return absl::UnimplementedError(
        "the CUDA backend has no device token head yet: a model whose image tokens are vectors (NextStep-1) runs "
        "on the CPU backend");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const ModelSpec& spec,
                                                           std::shared_ptr<const WeightSource> weights,
                                                           const BackendOptions& options) {
  if (absl::Status s = CheckSpec(spec); !s.ok()) return s;
  if (absl::Status s = CheckCudaSupports(spec); !s.ok()) return s;
  absl::StatusOr<FaultPlan> faults = FaultPlanFromEnv();  // testing only (engine/model/fault_guard.h)
  if (!faults.ok()) return faults.status();
  absl::StatusOr<cuda::DeviceWeights> device = cuda::UploadWeights(spec, *weights, options.weight_format);
  if (!device.ok()) return device.status();
  absl::StatusOr<std::unique_ptr<cuda::CudaBackend>> b =
      cuda::CudaBackend::Create(spec, *std::move(device), std::move(weights), options);
  if (!b.ok()) return b.status();
  // Sticky CUDA errors are fatal device errors in CudaBackend itself; the
  // guard adds fault injection (testing only; absent unless the plan is set).
  cuda::CudaBackend* raw = b->get();
  FaultHooks hooks;
  hooks.inject = [raw](FaultKind kind) { return raw->InjectFault(kind); };
  hooks.device_usable = [] { return cuda::DeviceUsable(); };
  return WithFaultGuard(std::unique_ptr<Backend>(std::move(*b)), *std::move(faults), std::move(hooks));
}

}  // namespace argen::model
