// Random-weight CUDA backend for benchmarks: no checkpoint, weights made on the device.
#include "engine/cuda/cuda_backend.h"

namespace argen::cuda {

absl::StatusOr<std::unique_ptr<CudaBackend>> CreateRandomCudaBackend(const model::ModelDims& dims,
                                                                     const model::BackendOptions& options,
                                                                     uint64_t seed) {
  absl::StatusOr<DeviceWeights> w = RandomDeviceWeights(dims, seed, 0.02f);
  if (!w.ok()) return w.status();
  const int32_t hidden = dims.hidden_size;
  // Text embeddings: a hash of (token, dim), scale 0.02 like the weights.
  cpu::TextEmbeddings embed = [hidden](const int32_t* ids, int64_t n, float* out) {
    for (int64_t i = 0; i < n; ++i)
      for (int32_t j = 0; j < hidden; ++j) {
        uint64_t x = (static_cast<uint64_t>(ids[i]) << 32) ^ static_cast<uint64_t>(j) ^ 0x9E3779B97F4A7C15ULL;
        x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33;
        out[i * hidden + j] = (static_cast<float>(x >> 40) * (1.0f / 16777216.0f) - 0.5f) * 0.07f;
      }
    return absl::OkStatus();
  };
  return CudaBackend::Create(dims, *std::move(w), std::move(embed), options);
}

}  // namespace argen::cuda
