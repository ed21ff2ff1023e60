// The shape of Emu3's vision tokenizer decoder (BAAI/Emu3-VisionTokenizer,
// MoVQ-style; transformers' Emu3VQVAE): read from the BAAI layout's own
// config.json (model_type "Emu3VisionVQ": ch, ch_mult, z_channels, ...) or
// from the transformers-native checkpoint's vq_config (base_channels,
// channel_multiplier, latent_channels, ...). docs/checkpoint-format.md, "Emu3".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace argen::emu3vq {

// GroupNorm groups of every spatial norm (32, eps 1e-6) and BatchNorm3d's eps.
inline constexpr int32_t kGroupNormGroups = 32;
inline constexpr float kBatchNormEps = 1e-5f;

struct Emu3VqConfig {
  int32_t codebook_size = 32768;
  int32_t embed_dim = 4;   // codebook vector width (the SpatialNorm condition's channels)
  int32_t z_channels = 4;  // latent channels (BAAI z_channels, HF latent_channels)
  int32_t out_channels = 3;
  int32_t temporal_downsample_factor = 4;  // log2 of it temporal upsample blocks
  int32_t ch = 256;                        // BAAI ch, HF base_channels
  std::vector<int32_t> ch_mult = {1, 2, 2, 4};
  int32_t num_res_blocks = 2;
  std::vector<int32_t> attn_resolutions = {3};  // levels (indices into ch_mult) with attention
  int32_t attention_heads = 1;                  // HF num_attention_heads; BAAI: one head

  int32_t levels() const { return static_cast<int32_t>(ch_mult.size()); }
  int32_t spatial_factor() const { return 1 << (levels() - 1); }  // pixels per code per side
  int32_t block_in() const { return ch * ch_mult.back(); }        // channels at the lowest resolution
  int32_t temporal_upsamples() const;                             // log2(temporal_downsample_factor)
  bool HasAttention(int32_t level) const;
};

// The checks the decoder relies on; errors name `where` and the field.
absl::Status ValidateEmu3VqConfig(const Emu3VqConfig& config, const std::string& where);

// BAAI/Emu3-VisionTokenizer config.json fields (model_type Emu3VisionVQ).
absl::StatusOr<Emu3VqConfig> ParseBaaiVqConfig(const nlohmann::json& root, const std::string& where);
// transformers' Emu3VQVAEConfig (config.json "vq_config").
absl::StatusOr<Emu3VqConfig> ParseHfVqConfig(const nlohmann::json& vq_config, const std::string& where);

}  // namespace argen::emu3vq
