// The VQ-16 image decoder's architecture (LlamaGen's VQ model, Janus'
// gen_vision_model; janus/models/vq_model.py). The official values are the
// defaults; a family's config parser (engine/families/janus) may override them
// from its config.json so smaller models of the same architecture load
// through the same code.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace argen::vq {

struct Vq16Config {
  std::string cls;                   // "VQ-16"
  int32_t image_token_size = 16384;  // tokens the language model samples (rows of gen_embed)
  int32_t n_embed = 8;               // gen_embed width
  int32_t codebook_size = 16384;     // = image_token_size
  int32_t codebook_embed_dim = 8;
  bool codebook_l2_norm = true;
  int32_t ch = 128;
  std::vector<int32_t> ch_mult = {1, 1, 2, 2, 4};  // decoder_ch_mult
  int32_t z_channels = 256;
  int32_t num_res_blocks = 2;
  int32_t num_groups = 32;   // GroupNorm groups: fixed by the architecture, not a key
  int32_t image_size = 384;  // pixels per side

  int32_t downsample() const { return 1 << (static_cast<int>(ch_mult.size()) - 1); }  // 16 for VQ-16
  int32_t token_grid() const { return image_size / downsample(); }                    // 24 for Janus-Pro
  int32_t image_tokens() const { return token_grid() * token_grid(); }                // 576
};

}  // namespace argen::vq
