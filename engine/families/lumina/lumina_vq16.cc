#include "engine/families/lumina/lumina_vq16.h"

#include "absl/strings/str_cat.h"

namespace argen::lumina {

absl::StatusOr<std::pair<vq::VqDecoderWeights, vq::Vq16Config>> AsVq16(const vqgan::VqganDecoderWeights& w,
                                                                       const vqgan::VqganConfig& c, int32_t grid_side) {
  auto unsupported = [](const std::string& why) {
    return absl::FailedPreconditionError(absl::StrCat("the GPU VQGAN decoder cannot run this VQGAN: ", why));
  };
  if (!w.mid_attn_1.has_value() || !c.attention) return unsupported("attn_type none");
  if (c.tanh_out) return unsupported("tanh_out");
  if (static_cast<int32_t>(w.up.size()) != c.levels()) return unsupported("decoder levels differ from ch_mult");
  vq::Vq16Config v;
  v.cls = "VQ-16";
  v.codebook_size = w.n_embed;
  v.image_token_size = w.n_embed;
  v.codebook_embed_dim = w.embed_dim;
  v.codebook_l2_norm = false;  // Chameleon's codebook is used as stored
  v.ch = c.ch;
  v.ch_mult = c.ch_mult;
  v.z_channels = c.z_channels;
  v.num_res_blocks = c.num_res_blocks;
  v.num_groups = vqgan::kGroupNormGroups;
  v.image_size = grid_side * c.downsample();
  if (absl::Status s = vq::ValidateVqConfig(v); !s.ok()) return unsupported(std::string(s.message()));

  vq::VqDecoderWeights d;
  d.codebook_size = w.n_embed;
  d.embed_dim = w.embed_dim;
  d.codebook = w.codebook;
  d.post_quant_conv = w.post_quant_conv;
  d.conv_in = w.conv_in;
  d.mid_res0 = w.mid_block_1;
  d.mid_attn = *w.mid_attn_1;
  d.mid_res1 = w.mid_block_2;
  // VQ-16's conv_blocks run from the lowest resolution; Chameleon's up levels are indexed from the highest.
  for (int32_t level = c.levels() - 1; level >= 0; --level) {
    const vqgan::UpLevelWeights& up = w.up[level];
    if (up.upsample_2x && !up.upsample.has_value()) return unsupported("upsampling without its conv");
    // VQ-16's decoders plan attention scratch for the lowest resolution only.
    if (level != c.levels() - 1 && !up.attn.empty()) return unsupported("attention above the lowest resolution");
    vq::UpBlockWeights b;
    b.res = up.block;
    b.attn = up.attn;
    b.upsample = up.upsample;
    d.blocks.push_back(std::move(b));
  }
  d.norm_out = w.norm_out;
  d.conv_out = w.conv_out;
  return std::make_pair(std::move(d), std::move(v));
}

}  // namespace argen::lumina
