// CreateCudaBackend (engine/model/backend_registry.h): checkpoint -> f32 (the
// CPU loader's checks and fusions) -> bf16 on the device.
#include "engine/cpu/cpu_weights.h"
#include "engine/cuda/cuda_backend.h"
#include "engine/model/backend_registry.h"

namespace argen::model {

absl::StatusOr<std::unique_ptr<Backend>> CreateCudaBackend(
    std::shared_ptr<const checkpoint::Checkpoint> checkpoint, const ModelDims& dims,
    const BackendOptions& options) {
  absl::StatusOr<cpu::CpuWeights> host = cpu::LoadCpuWeights(std::move(checkpoint), dims);
  if (!host.ok()) return host.status();
  absl::StatusOr<cuda::DeviceWeights> device = cuda::UploadWeights(*host, dims);
  if (!device.ok()) return device.status();
  cpu::TextEmbeddings embed = std::move(host->text_embeddings);
  host = absl::InternalError("released");  // free the f32 copy before the pools are sized
  absl::StatusOr<std::unique_ptr<cuda::CudaBackend>> b =
      cuda::CudaBackend::Create(dims, *std::move(device), std::move(embed), options);
  if (!b.ok()) return b.status();
  return std::unique_ptr<Backend>(std::move(*b));
}

}  // namespace argen::model
