// Random-weight CUDA backend for benchmarks: no checkpoint, weights made on the device
// (a vector model's flow head from the caller's description).
#include "engine/cuda/cuda_backend.h"

namespace argen::cuda {
namespace {

// Prefill embeddings only: a hash of (token, dim), scale 0.02 like the weights.
class HashedEmbeddings final : public model::WeightSource {
 public:
  absl::StatusOr<std::vector<float>> Load(const model::TensorRef& t) const override {
    return absl::InternalError("random backend: weights are made on the device");
  }
  absl::Status ReadRows(const model::TensorRef& t, const int32_t* ids, int64_t n, float* out) const override {
    const int64_t hidden = t.row_elements();
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < hidden; ++j) {
        uint64_t x = (static_cast<uint64_t>(ids[i]) << 32) ^ static_cast<uint64_t>(j) ^ 0x9E3779B97F4A7C15ULL;
        x ^= x >> 33;
        x *= 0xff51afd7ed558ccdULL;
        x ^= x >> 33;
        out[i * hidden + j] = (static_cast<float>(x >> 40) * (1.0f / 16777216.0f) - 0.5f) * 0.07f;
      }
    return absl::OkStatus();
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<CudaBackend>> CreateRandomCudaBackend(const model::ModelSpec& spec,
                                                                     const model::BackendOptions& options,
                                                                     uint64_t seed,
                                                                     const model::FlowMatchingHeadDesc* flow_head) {
  if (absl::Status s = model::CheckSpec(spec); !s.ok()) return s;
  if (spec.vector_tokens() != (flow_head != nullptr)) {
    return absl::InvalidArgumentError(
        spec.vector_tokens()
            ? "random cuda backend: a vector model (output.token_dim > 0) needs its flow head's description"
            : "random cuda backend: a flow head was given for a model whose tokens are codes");
  }
  // The head before the stack, as CreateCudaBackend does: auto sizing then sees its memory as taken.
  std::unique_ptr<DeviceFlowHead> head;
  if (flow_head != nullptr) {
    absl::StatusOr<std::unique_ptr<DeviceFlowHead>> made = DeviceFlowHead::Create(*flow_head);
    if (!made.ok()) return made.status();
    head = *std::move(made);
  }
  absl::StatusOr<DeviceWeights> w = RandomDeviceWeights(spec, seed, 0.02f, options.weight_format);
  if (!w.ok()) return w.status();
  return CudaBackend::Create(spec, *std::move(w), std::make_shared<HashedEmbeddings>(), options, std::move(head));
}

}  // namespace argen::cuda
