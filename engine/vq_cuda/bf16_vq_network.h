// The bf16 tensor-core path of the GPU VQ decoder: the VqProgram
// (vq_program.h) run with cuDNN for the 3x3 convolutions (NHWC bf16, fp32
// accumulation), cuBLAS bf16 GEMMs for the 1x1 convolutions and the
// attention, and kernels/vq_nhwc_kernels.h for GroupNorm(+swish), the
// upsample, the lookup and conv_out (fp32 out).
//
// Everything is fixed at Create: the weights uploaded once, every buffer for
// the chunk, and cuDNN descriptors and algorithms for each batch size of the
// ladder 1, 2, 4, ... chunk (a batch is decoded in ladder-sized pieces, so
// nothing is planned or allocated per call); then the network runs once per
// ladder size, which checks every call and warms cuDNN's plans. Run only
// enqueues work on the decoder's stream: no allocation, no synchronisation,
// nothing on the legacy default stream.
//
// Only in builds with cuDNN (ARGEN_WITH_CUDNN); elsewhere Create says so.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/vq/vq_config.h"
#include "engine/vq/vq_weights.h"

namespace argen::vq {

struct Bf16VqOptions {
  int32_t max_images_per_chunk = 32;
  // Device scratch limit: activations, attention, GroupNorm scratch, output
  // and cuDNN's workspace together.
  int64_t workspace_bytes = int64_t{4} << 30;
  int64_t cudnn_workspace_bytes = int64_t{256} << 20;  // the most cuDNN may use, within workspace_bytes
  bool benchmark_algorithms = true;                    // time cuDNN's candidates at Create, else its heuristics' first
};

class Bf16VqNetwork {
 public:
  // `stream` and `cublas` (on `stream`, its workspace set) are the decoder's.
  // FailedPrecondition: the path cannot run here (layout, cuDNN missing or NOT_SUPPORTED);
  // ResourceExhausted: memory.
  static absl::StatusOr<std::unique_ptr<Bf16VqNetwork>> Create(const VqDecoderWeights& weights,
                                                               const vq::Vq16Config& config,
                                                               const Bf16VqOptions& options, cudaStream_t stream,
                                                               cublasHandle_t cublas);
  ~Bf16VqNetwork();
  Bf16VqNetwork(const Bf16VqNetwork&) = delete;
  Bf16VqNetwork& operator=(const Bf16VqNetwork&) = delete;

  // Enqueues the decode of n <= chunk() grids whose ids are at `tokens`
  // (device, n * token_grid^2, validated) into output(): fp32 planar
  // [3][n * image_size^2] (channel c of image i, pixel p at c*n*S*S + i*S*S + p).
  absl::Status Run(const int32_t* tokens, int32_t n);
  const float* output() const;

  // One decode of n images (n a ladder size; ids 0) with CUDA events around
  // every op: milliseconds per op kind and per 3x3 conv shape, with TFLOP/s
  // and, for GroupNorm, GB/s. Synchronous; for benchmarks.
  absl::StatusOr<std::string> Profile(int32_t n);

  int32_t chunk() const;
  size_t scratch_bytes() const;  // device activations, attention, GroupNorm, output, cuDNN workspace
  size_t weight_bytes() const;
  const std::string& description() const;  // chunk, ladder and cuDNN's algorithms

  struct Impl;

 private:
  explicit Bf16VqNetwork(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace argen::vq
