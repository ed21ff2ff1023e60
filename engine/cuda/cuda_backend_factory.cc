// CreateCudaBackend (engine/model/backend_registry.h): the spec's tensors from
// the weight source -> bf16 (or the layers in fp8) on the device, one tensor at
// a time; a vector model's token head as a device flow head (device_flow_head.h).
#include "engine/cuda/cuda_backend.h"
#include "engine/cuda/device_flow_head.h"
#include "engine/cuda/device_memory.h"
#include "engine/model/backend_registry.h"
#include "engine/model/fault_guard.h"

namespace argen::model {
namespace {

// The parts of the contract this backend does not run: refused before any
// device work, naming what is missing.
absl::Status CheckCudaSupports(const ModelSpec& spec, const BackendOptions& options) {
  if (!spec.vector_tokens()) return absl::OkStatus();
  if (!spec.output.vector_out.present()) {
    return absl::UnimplementedError(
        "the CUDA backend needs a vector model's conditions through output.vector_out (the final-normed hidden "
        "state itself is not supported as the condition); run the model on the CPU backend");
  }
  if (options.token_head->flow_matching() == nullptr) {
    return absl::UnimplementedError(
        "the CUDA backend runs a vector model's token head on the device, and this token head offers no device "
        "description (TokenHead::flow_matching); run the model on the CPU backend");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const ModelSpec& spec,
                                                           std::shared_ptr<const WeightSource> weights,
                                                           const BackendOptions& options) {
  if (absl::Status s = CheckSpec(spec); !s.ok()) return s;
  if (absl::Status s = CheckTokenHead(spec, options.token_head.get()); !s.ok()) return s;
  if (absl::Status s = CheckCudaSupports(spec, options); !s.ok()) return s;
  absl::StatusOr<FaultPlan> faults = FaultPlanFromEnv();  // testing only (engine/model/fault_guard.h)
  if (!faults.ok()) return faults.status();
  // A vector model's head before the stack: auto sizing then sees its memory as taken.
  std::unique_ptr<cuda::DeviceFlowHead> head;
  if (spec.vector_tokens()) {
    absl::StatusOr<std::unique_ptr<cuda::DeviceFlowHead>> made =
        cuda::DeviceFlowHead::Create(*options.token_head->flow_matching());
    if (!made.ok()) return made.status();
    head = *std::move(made);
  }
  absl::StatusOr<cuda::DeviceWeights> device = cuda::UploadWeights(spec, *weights, options.weight_format);
  if (!device.ok()) return device.status();
  absl::StatusOr<std::unique_ptr<cuda::CudaBackend>> b =
      cuda::CudaBackend::Create(spec, *std::move(device), std::move(weights), options, std::move(head));
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
