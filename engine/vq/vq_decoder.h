// The VQ-16 image decoder on CPU: image token grids -> RGB8 images, computing
// what Janus' gen_vision_model.decode_code + the official pixel conversion do
// (codebook lookup, post_quant_conv, decoder, clip((x+1)/2*255) truncated).
//
// Weights are loaded once; activations live in scratch buffers sized at
// construction for the configured image size and reused by every call, so a
// decode allocates only its result images. Images of a batch are decoded one
// after another (each conv is already a large GEMM); OpenBLAS threads each GEMM
// and a small pool of `threads` threads the element-wise work between them.
//
// Thread-safety: Decode/DecodeToFloat may be called from any thread; calls
// serialise on the scratch buffers (one decode at a time per VqDecoder).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/engine.h"
#include "engine/parallel/thread_pool.h"
#include "engine/vq/vq_config.h"
#include "engine/vq/vq_weights.h"

namespace argen::vq {

class VqDecoder {
 public:
  // Loads gen_vision_model.* from `checkpoint` (errors name the tensor and file).
  // threads: element-wise worker threads (0: all cores, 1: the caller only).
  static absl::StatusOr<std::unique_ptr<VqDecoder>> Create(const checkpoint::Checkpoint& checkpoint,
                                                           const vq::Vq16Config& config, int32_t threads = 0);
  // From weights already loaded (shapes must match `config`, as LoadVqDecoderWeights makes them).
  static absl::StatusOr<std::unique_ptr<VqDecoder>> Create(VqDecoderWeights weights, const vq::Vq16Config& config,
                                                           int32_t threads = 0);

  // Each grid: token_grid()^2 codebook ids in raster order (row by row).
  // Every grid is validated before any is decoded; a wrong length or an id
  // outside [0, codebook_size) is InvalidArgument naming the grid and position.
  absl::StatusOr<std::vector<engine::RgbImage>> Decode(const std::vector<std::vector<int32_t>>& token_grids);

  // One grid to the decoder's float output [3, image_size, image_size] (CHW,
  // nominally in [-1, 1], not clamped), resized into *chw. For tests and tools.
  absl::Status DecodeToFloat(std::span<const int32_t> tokens, std::vector<float>* chw);

  int32_t image_size() const { return config_.image_size; }
  int32_t token_grid() const { return config_.token_grid(); }
  int32_t codebook_size() const { return config_.codebook_size; }
  // Bytes of preallocated activation scratch.
  size_t scratch_bytes() const;

 private:
  VqDecoder(VqDecoderWeights weights, const vq::Vq16Config& config, int32_t threads);
  absl::Status ValidateGrid(std::span<const int32_t> tokens, size_t grid_index) const;
  // Runs the network on validated tokens; leaves [3, S, S] in the returned buffer.
  const float* Run(std::span<const int32_t> tokens);
  void ResnetBlock(const ResnetBlockWeights& w, int32_t h, int32_t wd);
  void AttnBlock(const AttnBlockWeights& w, int32_t h, int32_t wd);

  VqDecoderWeights weights_;
  vq::Vq16Config config_;
  std::mutex mu_;  // guards the pool and the scratch below
  parallel::ThreadPool pool_;
  // Three activation buffers: x_ holds the running activation, a_ and b_ are temporaries.
  std::vector<float> x_, a_, b_;
  std::vector<float> col_;                 // im2col band
  std::vector<float> q_, k_, v_, scores_;  // attention at the lowest resolution
};

}  // namespace argen::vq
