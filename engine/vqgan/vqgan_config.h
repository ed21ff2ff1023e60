// The configuration of a Chameleon (taming-transformers) VQGAN as its
// vqgan.yaml states it: model.params.{embed_dim, n_embed} and
// model.params.ddconfig (ch, ch_mult, num_res_blocks, attn_resolutions,
// z_channels, resolution, out_ch, ...). Meta's tokenizer: 8192 codes of 256,
// ch 128, ch_mult [1, 1, 2, 2, 4], 2 res blocks, no attention outside the
// middle block, 16x downsampling (docs/lumina-mgpt.md).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace argen::vqgan {

// Every normalisation of the architecture is GroupNorm with this many groups.
inline constexpr int32_t kGroupNormGroups = 32;

struct VqganConfig {
  int32_t embed_dim = 0;  // codebook vector width
  int32_t n_embed = 0;    // codebook size
  int32_t z_channels = 0;
  int32_t ch = 0;
  std::vector<int32_t> ch_mult;
  int32_t num_res_blocks = 0;             // the decoder has num_res_blocks + 1 per level
  std::vector<int32_t> attn_resolutions;  // nominal resolutions (of `resolution`) with attention blocks
  int32_t resolution = 0;                 // nominal input size; decides only where attention goes
  int32_t out_ch = 3;
  bool resamp_with_conv = true;  // the upsampling's 3x3 conv
  bool tanh_out = false;
  bool attention = true;  // attn_type "vanilla" (true) or "none"
  // false: no codebook and no post_quant_conv; the decoder reads a z_channels
  // latent (a KL autoencoder's decoder, e.g. Flux's / NextStep-1's VAE:
  // VqganDecoder::DecodeLatentToFloat); embed_dim and n_embed are unused.
  bool quantized = true;

  int32_t levels() const { return static_cast<int32_t>(ch_mult.size()); }
  int32_t downsample() const { return 1 << (levels() - 1); }
  int32_t width(int32_t level) const { return ch * ch_mult[level]; }
  // Whether decoder level `level` (0: full resolution) has attention after each block.
  bool LevelHasAttention(int32_t level) const;
};

// Checks ranges and consistency; errors name the yaml field (`where` first).
absl::Status ValidateVqganConfig(const VqganConfig& config, std::string_view where);

// From vqgan.yaml text; `source` names it in errors.
absl::StatusOr<VqganConfig> ParseVqganYaml(std::string_view yaml_text, std::string_view source);
absl::StatusOr<VqganConfig> LoadVqganYaml(const std::string& path);

}  // namespace argen::vqgan
