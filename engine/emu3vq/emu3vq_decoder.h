// Emu3's vision tokenizer decoder on the CPU (the reference): code grids of
// any height x width (raster order) -> RGB8 images of spatial_factor x that
// size (8x for the published tokenizer), computing frame 0 of transformers'
// Emu3VQVAE.decode (which the pipeline keeps) with the temporal layers
// reduced to that frame (emu3vq_weights.h), then the image processor's
// postprocess (x * 0.5 + 0.5, x 255, clip, truncation: vq::ChwToRgb8).
//
// Per grid: codebook rows -> post_quant_conv -> the temporal stacks
// (BatchNorm affine, swish, 3x3 conv; nearest-upsample convs + swish), run on
// both the latents and the codebook vectors (the SpatialNorm condition zq)
// -> conv_in -> middle (SpatialNorm ResNet, single-head attention, ResNet)
// -> levels from the lowest resolution (ResNets, attention where configured,
// nearest x2 + conv) -> SpatialNorm, swish, conv_out. The building blocks
// are engine/vq's (im2col conv + OpenBLAS, GroupNorm, spatial attention).
//
// Thread-safety: Decode / DecodeToFloat may be called from any thread; calls
// serialise.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/emu3vq/emu3vq_config.h"
#include "engine/emu3vq/emu3vq_weights.h"
#include "engine/engine.h"
#include "engine/parallel/thread_pool.h"

namespace argen::emu3vq {

struct CodeGrid {
  int32_t height = 0, width = 0;
  std::vector<int32_t> codes;  // height * width, row by row
};

// The decoders' check of one grid (index: its position in the call):
// InvalidArgument naming the grid (and position) for a size of no cells, more
// than max_cells, a code count other than height * width, or a code outside
// [0, codebook_size). The CPU and GPU decoders give the same messages.
absl::Status ValidateCodeGrid(const CodeGrid& grid, size_t index, int32_t max_cells, int32_t codebook_size);

class Emu3VqDecoder {
 public:
  // threads: element-wise worker threads (0: all cores, 1: the caller only).
  // max_cells: the largest grid (codes) a call may decode.
  static absl::StatusOr<std::unique_ptr<Emu3VqDecoder>> Create(Emu3VqWeights weights, const Emu3VqConfig& config,
                                                               int32_t max_cells, int32_t threads = 0);

  // Every grid is validated before any is decoded: InvalidArgument naming the
  // grid (and position) for a bad size or a code outside [0, codebook_size).
  absl::StatusOr<std::vector<engine::RgbImage>> Decode(const std::vector<CodeGrid>& grids);
  // One grid to frame 0's float output [3, f*h, f*w] (CHW, before the pixel
  // conversion). For tests and tools.
  absl::Status DecodeToFloat(const CodeGrid& grid, std::vector<float>* chw);

  const Emu3VqConfig& config() const { return config_; }

 private:
  Emu3VqDecoder(Emu3VqWeights weights, const Emu3VqConfig& config, int32_t max_cells, int32_t threads);
  std::vector<float> Run(const CodeGrid& grid);

  Emu3VqWeights weights_;
  Emu3VqConfig config_;
  int32_t max_cells_;
  std::mutex mu_;
  parallel::ThreadPool pool_;
};

}  // namespace argen::emu3vq
