// The bf16 tensor-core path of Emu3's GPU vision decoder (CudaEmu3VqDecoder
// with precision bf16), on the VQ-16 bf16 path's building blocks: NHWC bf16
// activations, cuDNN for the 3x3 convolutions (cudnn_convs.h, fp32
// accumulation), cuBLAS bf16 GEMMs for the 1x1 convolutions and the
// single-head attention, kernels/vq_nhwc_kernels.h for the lookup, GroupNorm,
// the upsample, bias adds, the softmax and conv_out (fp32 out), plus Emu3's two
// NHWC kernels there: the temporal stack's affine + swish and SpatialNorm's
// modulation (GroupNorm, then scale / shift from conv_y / conv_b of the
// condition at the code resolution, nearest-resized on the fly).
//
// The network is the fp32 path's (frame 0; causal 3-D convs as their last
// tap; BatchNorm3d as an affine: emu3vq_weights.h) on weights laid out by
// bf16_emu3vq_layout.h (host code, tested in CI): the latent and condition
// channels (z_channels = embed_dim, 4 in the published tokenizer) padded with
// zeros to a multiple of 8, so every tensor is 16-byte vectors; the codebook
// twice, as the condition's table and folded through post_quant_conv; biases
// folded where a consumer can take them (GroupNorm's input bias, norm2's
// shift, one output bias per ResNet).
//
// Grids of any size up to max_cells: every buffer is sized at Create for a
// chunk of the largest grid; cuDNN's descriptors and algorithms are planned
// per grid size (PlanGrid, or the first Run of a size), for every batch size
// of the ladder 1, 2, 4, ... chunk; a chunk decodes in ladder-sized pieces.
// Run only enqueues on the decoder's stream, except that it first plans a
// grid size it has not seen (synchronous).
//
// Only in builds with cuDNN (ARGEN_WITH_CUDNN); elsewhere Create says so.
// Layouts it cannot run (channels not multiples of 8, GroupNorm wider than
// the kernel, conv_out wider than the kernel) are FailedPrecondition naming
// the layer: the decoder falls back to fp32 or fails as asked.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/emu3vq/emu3vq_config.h"
#include "engine/emu3vq/emu3vq_weights.h"

namespace argen::vq {

struct Bf16Emu3VqOptions {
  int32_t max_images_per_chunk = 16;
  // Device scratch limit: activations, condition, attention, GroupNorm
  // scratch, output and cuDNN's workspace together.
  int64_t workspace_bytes = int64_t{4} << 30;
  int64_t cudnn_workspace_bytes = int64_t{256} << 20;  // the most cuDNN may use, within workspace_bytes
  bool benchmark_algorithms = true;                    // time cuDNN's candidates when a grid size is planned
};

class Bf16Emu3VqNetwork {
 public:
  // `stream` and `cublas` (on `stream`, its workspace set) are the decoder's.
  // FailedPrecondition: the path cannot run here (layout, cuDNN missing);
  // ResourceExhausted: memory.
  static absl::StatusOr<std::unique_ptr<Bf16Emu3VqNetwork>> Create(const emu3vq::Emu3VqWeights& weights,
                                                                   const emu3vq::Emu3VqConfig& config,
                                                                   int32_t max_cells, const Bf16Emu3VqOptions& options,
                                                                   cudaStream_t stream, cublasHandle_t cublas);
  ~Bf16Emu3VqNetwork();
  Bf16Emu3VqNetwork(const Bf16Emu3VqNetwork&) = delete;
  Bf16Emu3VqNetwork& operator=(const Bf16Emu3VqNetwork&) = delete;

  // Plans cuDNN for grids of zh x zw codes at every ladder batch (synchronous;
  // a no-op for a size already planned). zh * zw <= max_cells.
  absl::Status PlanGrid(int32_t zh, int32_t zw);

  // Enqueues the decode of n <= chunk() grids of zh x zw codes at `codes`
  // (device, n * zh * zw, validated) into output(): fp32 planar [3][n * H * W]
  // (channel c of image i, pixel p at c*n*H*W + i*H*W + p), H = zh * f, W = zw * f.
  absl::Status Run(const int32_t* codes, int32_t n, int32_t zh, int32_t zw);
  const float* output() const;

  int32_t chunk() const;
  size_t scratch_bytes() const;  // activations, condition, attention, GroupNorm, output, cuDNN workspace
  size_t weight_bytes() const;
  std::string description() const;  // chunk, ladder, grid sizes planned and cuDNN's algorithms

  struct Impl;

 private:
  explicit Bf16Emu3VqNetwork(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace argen::vq
