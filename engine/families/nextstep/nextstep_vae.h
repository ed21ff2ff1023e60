// NextStep-1's image decoder on the CPU: a grid of continuous tokens -> RGB8,
// computing what NextStepPipeline.generate_image does after decoding
// (pipeline_nextstep.py steps 7-8 and utils/image_utils.to_pil):
//   latents = NextStep.unpatchify(tokens)  [C, h p, w p] from [h w, C p p]
//             (token (i, j)'s value c * p^2 + a * p + b is latent (c, i p + a, j p + b))
//   latents = latents / scaling_factor + shift_factor
//   pixels  = the VAE decoder (modeling_flux_vae.py's Decoder: Flux's / taming's
//             conv_in, mid block with attention, up levels without, norm_out,
//             conv_out; engine/vqgan's decoder without a quantizer)
//   rgb     = round(clamp(pixels / 2 + 0.5, 0, 1) * 255)  (to_pil's "11" mode)
// The VAE's weights are <vae_dir>/checkpoint.pt (torch.save of the
// AutoencoderKL state dict; only decoder.* is read) with its config.json.
//
// Thread-safety: Decode may be called from any thread; calls serialise.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/engine.h"
#include "engine/families/nextstep/nextstep_config.h"
#include "engine/vqgan/vqgan_decoder.h"

namespace argen::nextstep {

// One image's tokens, raster order.
struct TokenGrid {
  int32_t grid_h = 0, grid_w = 0;
  std::vector<float> tokens;  // [grid_h * grid_w, token_dim]
};

class NextStepVaeDecoder {
 public:
  // latent_patch_size from the model's config; max_grid: the largest token
  // grid side decoded (scratch is planned for max_grid^2 tokens).
  // threads: element-wise worker threads (0: all cores). Errors name the file
  // or tensor at fault.
  static absl::StatusOr<std::unique_ptr<NextStepVaeDecoder>> Create(const std::string& vae_dir,
                                                                    const NextStepVaeConfig& config,
                                                                    int32_t latent_patch_size, int32_t max_grid,
                                                                    int32_t threads = 0);

  // The decoder's float output [3, H, W] (H = grid_h * patch * downsample), before the pixel conversion.
  absl::Status DecodeToFloat(const TokenGrid& grid, std::vector<float>* chw);
  // Every grid validated first: InvalidArgument naming the grid for a wrong token count or size.
  absl::StatusOr<std::vector<engine::RgbImage>> Decode(const std::vector<TokenGrid>& grids);

  int32_t token_dim() const { return config_.z_channels * patch_ * patch_; }
  int32_t pixels_per_token() const { return patch_ * config_.downsample(); }

 private:
  NextStepVaeDecoder(std::unique_ptr<vqgan::VqganDecoder> decoder, const NextStepVaeConfig& config, int32_t patch)
      : decoder_(std::move(decoder)), config_(config), patch_(patch) {}

  std::unique_ptr<vqgan::VqganDecoder> decoder_;
  NextStepVaeConfig config_;
  int32_t patch_ = 0;
};

// The Flux decoder as engine/vqgan's configuration (no quantizer, attention
// only in the middle block).
vqgan::VqganConfig FluxDecoderConfig(const NextStepVaeConfig& config);

// The decoder's weights from <vae_dir>/checkpoint.pt (errors name the file or tensor).
absl::StatusOr<vqgan::VqganDecoderWeights> LoadNextStepVaeWeights(const std::string& vae_dir,
                                                                  const NextStepVaeConfig& config);

// Grid `index`'s decoder input: unpatchify, / scaling_factor + shift_factor.
// InvalidArgument naming token_grids[index] for a wrong size or token count.
absl::StatusOr<vqgan::LatentGrid> NextStepLatent(const TokenGrid& grid, size_t index, const NextStepVaeConfig& config,
                                                 int32_t latent_patch_size);

// to_pil's conversion of the decoder's [3, height, width] CHW floats (what the CPU and GPU paths share).
engine::RgbImage NextStepPixelsToRgb(const float* chw, int32_t height, int32_t width);

}  // namespace argen::nextstep
