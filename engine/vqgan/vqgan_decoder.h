// The Chameleon VQGAN decoder on CPU: grids of VQGAN codes (any height x
// width, raster order) -> RGB8 images of 16x that size, computing what
// Chameleon's ImageTokenizer.pil_from_img_toks does (codebook rows,
// post_quant_conv, decoder, clamp to [-1, 1], (x + 1) / 2 * 255 truncated).
// Lumina-mGPT decodes non-square grids (e.g. 32 x 64 codes for 1024 x 512).
//
// The building blocks are engine/vq's (im2col conv, GroupNorm + swish,
// spatial attention, nearest upsampling, pixel conversion). Scratch buffers
// are sized at construction for the largest grid the caller allows and reused,
// so a decode allocates only its result images.
//
// Thread-safety: Decode/DecodeToFloat may be called from any thread; calls
// serialise (one decode at a time per decoder).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "engine/parallel/thread_pool.h"
#include "engine/vqgan/vqgan_config.h"
#include "engine/vqgan/vqgan_weights.h"

namespace argen::vqgan {

// The largest grid a decoder accepts, in codes: height * width <= max_cells
// and max(height, width) <= max_side (scratch is planned from both).
struct DecodeLimits {
  int32_t max_cells = 32 * 32;
  int32_t max_side = 32;
};

struct CodeGrid {
  int32_t height = 0, width = 0;
  std::vector<int32_t> codes;  // height * width, row by row
};

// The input of a decoder without a quantizer (VqganConfig::quantized false).
struct LatentGrid {
  int32_t height = 0, width = 0;
  std::vector<float> chw;  // [z_channels, height, width]
};

class VqganDecoder {
 public:
  // threads: element-wise worker threads (0: all cores, 1: the caller only).
  // Errors: weights not matching the config, bad limits, scratch over 8 GiB.
  static absl::StatusOr<std::unique_ptr<VqganDecoder>> Create(VqganDecoderWeights weights, const VqganConfig& config,
                                                              DecodeLimits limits, int32_t threads = 0);

  // Every grid is validated before any is decoded: InvalidArgument naming the
  // grid (and position) for a bad size or a code outside [0, n_embed).
  absl::StatusOr<std::vector<engine::RgbImage>> Decode(const std::vector<CodeGrid>& grids);

  // One grid to the decoder's float output [3, 16h, 16w] (CHW, before the
  // clamp), resized into *chw. For tests and tools.
  absl::Status DecodeToFloat(const CodeGrid& grid, std::vector<float>* chw);

  // A latent to the decoder's float output [out_ch, dh, dw] (d: downsample(),
  // CHW, not clamped), resized into *chw; only for a config without a
  // quantizer (else FailedPrecondition). InvalidArgument for a bad size or a
  // latent of the wrong length.
  absl::Status DecodeLatentToFloat(const LatentGrid& latent, std::vector<float>* chw);

  const VqganConfig& config() const { return config_; }
  const DecodeLimits& limits() const { return limits_; }
  size_t scratch_bytes() const;

 private:
  VqganDecoder(VqganDecoderWeights weights, const VqganConfig& config, DecodeLimits limits, int32_t threads);
  absl::Status ValidateGrid(const CodeGrid& grid, size_t index) const;
  absl::Status ValidateSize(int32_t height, int32_t width, size_t index) const;
  const float* Run(const CodeGrid& grid);         // leaves [3, H, W] in the returned buffer
  const float* RunDecoder(int32_t h, int32_t w);  // from the decoder's input in a_
  void ResnetBlock(const vq::ResnetBlockWeights& w, int32_t h, int32_t wd);
  void AttnBlock(const vq::AttnBlockWeights& w, int32_t h, int32_t wd);

  VqganDecoderWeights weights_;
  VqganConfig config_;
  DecodeLimits limits_;
  std::mutex mu_;  // guards the pool and the scratch below
  parallel::ThreadPool pool_;
  std::vector<float> x_, a_, b_;  // running activation and two temporaries
  std::vector<float> col_;        // im2col band
  std::vector<float> q_, k_, v_, scores_;
  size_t planned_bytes_ = 0;
};

}  // namespace argen::vqgan
