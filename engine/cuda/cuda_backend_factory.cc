// CreateCudaBackend (engine/model/backend_registry.h): the spec's tensors from
// the weight source -> bf16 on the device, one tensor at a time.
#include "engine/cuda/cuda_backend.h"
#include "engine/model/backend_registry.h"

namespace argen::model {

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(const ModelSpec& spec,
                                                           std::shared_ptr<const WeightSource> weights,
                                                           const BackendOptions& options) {
  if (absl::Status s = CheckSpec(spec); !s.ok()) return s;
  absl::StatusOr<cuda::DeviceWeights> device = cuda::UploadWeights(spec, *weights);
  if (!device.ok()) return device.status();
  absl::StatusOr<std::unique_ptr<cuda::CudaBackend>> b =
      cuda::CudaBackend::Create(spec, *std::move(device), std::move(weights), options);
  if (!b.ok()) return b.status();
  return std::unique_ptr<Backend>(std::move(*b));
}

}  // namespace argen::model
