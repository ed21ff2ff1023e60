#include "engine/families/nextstep/nextstep_vae.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "engine/checkpoint/weights_file.h"
#include "engine/vqgan/vqgan_weights.h"

namespace argen::nextstep {

vqgan::VqganConfig FluxDecoderConfig(const NextStepVaeConfig& config) {
  vqgan::VqganConfig c;
  c.quantized = false;
  c.z_channels = config.z_channels;
  c.ch = config.ch;
  c.ch_mult = config.ch_mult;
  c.num_res_blocks = config.num_res_blocks;
  c.attn_resolutions = {};                   // Flux's decoder: attention in the middle block only
  c.resolution = 256 * config.downsample();  // decides only where attention goes: nowhere here
  c.out_ch = config.out_ch;
  c.resamp_with_conv = true;
  c.tanh_out = false;
  c.attention = true;
  return c;
}

absl::StatusOr<vqgan::VqganDecoderWeights> LoadNextStepVaeWeights(const std::string& vae_dir,
                                                                  const NextStepVaeConfig& config) {
  const std::string path = (std::filesystem::path(vae_dir) / "checkpoint.pt").string();
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> file = checkpoint::OpenCheckpointFile(path);
  if (!file.ok()) return file.status();
  return vqgan::LoadVqganDecoderWeights(vqgan::CheckpointTensorSource(**file), FluxDecoderConfig(config));
}

absl::StatusOr<std::unique_ptr<NextStepVaeDecoder>> NextStepVaeDecoder::Create(const std::string& vae_dir,
                                                                               const NextStepVaeConfig& config,
                                                                               int32_t latent_patch_size,
                                                                               int32_t max_grid, int32_t threads) {
  if (latent_patch_size <= 0 || max_grid <= 0) {
    return absl::InvalidArgumentError("NextStep VAE: latent_patch_size and the largest grid must be positive");
  }
  absl::StatusOr<vqgan::VqganDecoderWeights> weights = LoadNextStepVaeWeights(vae_dir, config);
  if (!weights.ok()) return weights.status();
  const vqgan::VqganConfig flux = FluxDecoderConfig(config);
  const int32_t side = max_grid * latent_patch_size;
  absl::StatusOr<std::unique_ptr<vqgan::VqganDecoder>> decoder =
      vqgan::VqganDecoder::Create(*std::move(weights), flux, vqgan::DecodeLimits{side * side, side}, threads);
  if (!decoder.ok()) return decoder.status();
  return std::unique_ptr<NextStepVaeDecoder>(new NextStepVaeDecoder(*std::move(decoder), config, latent_patch_size));
}

absl::StatusOr<vqgan::LatentGrid> NextStepLatent(const TokenGrid& grid, size_t index, const NextStepVaeConfig& config,
                                                 int32_t latent_patch_size) {
  const int32_t p = latent_patch_size, C = config.z_channels, D = C * p * p;
  if (grid.grid_h <= 0 || grid.grid_w <= 0 ||
      grid.tokens.size() != static_cast<size_t>(grid.grid_h) * grid.grid_w * D) {
    return absl::InvalidArgumentError(absl::StrCat("token_grids[", index, "]: ", grid.tokens.size(), " values for a ",
                                                   grid.grid_h, " x ", grid.grid_w, " grid of ", D, "-value tokens"));
  }
  vqgan::LatentGrid latent;
  latent.height = grid.grid_h * p;
  latent.width = grid.grid_w * p;
  latent.chw.resize(static_cast<size_t>(C) * latent.height * latent.width);
  const float inv_scale = static_cast<float>(1.0 / config.scaling_factor);
  const float shift = static_cast<float>(config.shift_factor);
  for (int32_t i = 0; i < grid.grid_h; ++i) {
    for (int32_t j = 0; j < grid.grid_w; ++j) {
      const float* token = grid.tokens.data() + (static_cast<size_t>(i) * grid.grid_w + j) * D;
      for (int32_t c = 0; c < C; ++c) {
        for (int32_t a = 0; a < p; ++a) {
          for (int32_t b = 0; b < p; ++b) {
            const size_t y = static_cast<size_t>(i) * p + a, x = static_cast<size_t>(j) * p + b;
            latent.chw[(c * latent.height + y) * latent.width + x] = token[(c * p + a) * p + b] * inv_scale + shift;
          }
        }
      }
    }
  }
  return latent;
}

absl::Status NextStepVaeDecoder::DecodeToFloat(const TokenGrid& grid, std::vector<float>* chw) {
  absl::StatusOr<vqgan::LatentGrid> latent = NextStepLatent(grid, 0, config_, patch_);
  if (!latent.ok()) return latent.status();
  return decoder_->DecodeLatentToFloat(*latent, chw);
}

absl::StatusOr<std::vector<engine::RgbImage>> NextStepVaeDecoder::Decode(const std::vector<TokenGrid>& grids) {
  std::vector<vqgan::LatentGrid> latents;
  latents.reserve(grids.size());
  for (size_t i = 0; i < grids.size(); ++i) {
    absl::StatusOr<vqgan::LatentGrid> latent = NextStepLatent(grids[i], i, config_, patch_);
    if (!latent.ok()) return latent.status();
    latents.push_back(*std::move(latent));
  }
  std::vector<engine::RgbImage> images(grids.size());
  std::vector<float> chw;
  for (size_t i = 0; i < grids.size(); ++i) {
    if (absl::Status s = decoder_->DecodeLatentToFloat(latents[i], &chw); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("token_grids[", i, "]: ", s.message()));
    }
    images[i] =
        NextStepPixelsToRgb(chw.data(), grids[i].grid_h * pixels_per_token(), grids[i].grid_w * pixels_per_token());
  }
  return images;
}

engine::RgbImage NextStepPixelsToRgb(const float* chw, int32_t height, int32_t width) {
  engine::RgbImage image;
  image.height = height;
  image.width = width;
  const size_t hw = static_cast<size_t>(height) * width;
  image.rgb.resize(3 * hw);
  for (size_t c = 0; c < 3; ++c) {
    for (size_t q = 0; q < hw; ++q) {
      // to_pil: (x / 2 + 0.5).clamp(0, 1) * 255, rounded half to even; NaN becomes 0.
      const float v = std::clamp(chw[c * hw + q] / 2.0f + 0.5f, 0.0f, 1.0f) * 255.0f;
      image.rgb[3 * q + c] = std::isnan(v) ? 0 : static_cast<uint8_t>(std::nearbyint(v));
    }
  }
  return image;
}

}  // namespace argen::nextstep
