// The VQ-16 image decoder on the GPU: image token grids -> RGB8 images, the same
// network and the same validation as the CPU vq::VqDecoder (the reference).
//
// Whole batch chunks go through the network together in the channel-major
// layout [C][N*H*W] (kernels/vq_kernels.h), so every convolution of a chunk is
// one cuBLAS SGEMM (3x3 ones through im2col, in column bands when the
// workspace limit asks for it) and every GroupNorm one launch. Attention at
// the lowest resolution is a strided-batched GEMM per image.
//
// Memory: weights are uploaded once as fp32; every device and pinned host
// buffer (activations, im2col band, attention scratch, token and pixel
// staging, the cuBLAS workspace) is allocated at Create, sized for the chunk.
// Decode allocates only its result images. A batch larger than the chunk is
// decoded chunk by chunk.
//
// Numerics: fp32 GEMMs (CUBLAS_DEFAULT_MATH) unless allow_tf32; GroupNorm and
// softmax statistics in double as on the CPU; the pixel conversion is the
// CPU's bit for bit given the same floats.
//
// Thread-safety: Decode/DecodeToFloat may be called from any thread; calls
// serialise on a mutex. The decoder has its own non-blocking stream and cuBLAS
// handle, so it runs beside an engine stepping on another stream.
// CUDA and cuBLAS failures come back as absl::Status, never as a crash.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/checkpoint/janus_config.h"
#include "engine/engine.h"
#include "engine/vq/vq_weights.h"

namespace argen::vq {

struct CudaVqOptions {
  // Most images decoded together (one GEMM per conv); fewer when the
  // workspace limit allows fewer. 1 ... 4096.
  int32_t max_images_per_chunk = 32;
  // Limit on the device scratch: activations, im2col band and attention
  // (weights and the 32 MiB cuBLAS workspace come on top). Activations take at
  // most half, the im2col band the rest (it is banded to fit).
  int64_t workspace_bytes = int64_t{4} << 30;
  // TF32 tensor-core GEMMs (faster, ~1e-3 relative error) instead of fp32.
  bool allow_tf32 = false;
};

class CudaVqDecoder {
 public:
  // Loads gen_vision_model.* (vq::LoadVqDecoderWeights; errors name the tensor
  // and file), validates the options, uploads the weights and allocates every
  // buffer. No GPU or too little memory: a Status (ResourceExhausted for memory).
  static absl::StatusOr<std::unique_ptr<CudaVqDecoder>> Create(const checkpoint::Checkpoint& checkpoint,
                                                               const checkpoint::GenVisionConfig& config,
                                                               const CudaVqOptions& options = {});
  static absl::StatusOr<std::unique_ptr<CudaVqDecoder>> Create(VqDecoderWeights weights,
                                                               const checkpoint::GenVisionConfig& config,
                                                               const CudaVqOptions& options = {});
  ~CudaVqDecoder();
  CudaVqDecoder(const CudaVqDecoder&) = delete;
  CudaVqDecoder& operator=(const CudaVqDecoder&) = delete;

  // As VqDecoder::Decode: every grid is validated before any is decoded, with
  // the CPU decoder's InvalidArgument messages.
  absl::StatusOr<std::vector<engine::RgbImage>> Decode(const std::vector<std::vector<int32_t>>& token_grids);

  // As VqDecoder::DecodeToFloat: one grid to [3, image_size, image_size] CHW floats.
  absl::Status DecodeToFloat(std::span<const int32_t> tokens, std::vector<float>* chw);
  // Several grids at once (chunked like Decode): (*chw)[i] is grid i's CHW floats.
  absl::Status DecodeToFloatBatch(const std::vector<std::vector<int32_t>>& token_grids,
                                  std::vector<std::vector<float>>* chw);

  int32_t image_size() const;
  int32_t token_grid() const;
  int32_t codebook_size() const;
  int32_t chunk_images() const;  // images per chunk after the workspace limit
  size_t scratch_bytes() const;  // device activations + im2col + attention
  size_t weight_bytes() const;   // device weights

  struct State;

 private:
  explicit CudaVqDecoder(std::unique_ptr<State> state);
  absl::Status ValidateGrid(std::span<const int32_t> tokens, size_t grid_index) const;
  // Decodes grids [begin, end) (validated, end - begin <= chunk) to the device
  // output [3][n*hw]; then copies RGB8 (rgb != nullptr) or floats to the host staging.
  absl::Status RunChunk(const std::vector<std::span<const int32_t>>& grids, bool rgb);

  std::mutex mu_;  // guards everything the device work touches
  std::unique_ptr<State> s_;
};

}  // namespace argen::vq
