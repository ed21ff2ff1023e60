#include "engine/vq/vq_tensors.h"

#include "absl/strings/str_cat.h"

namespace argen::vq {
namespace {

// Appends weight+bias of a Linear / Conv2d / GroupNorm.
void WeightBias(std::vector<VqTensor>& out, const std::string& prefix, std::vector<int64_t> weight_shape) {
  const int64_t out_dim = weight_shape[0];
  out.push_back({prefix + ".weight", std::move(weight_shape)});
  out.push_back({prefix + ".bias", {out_dim}});
}

void Conv(std::vector<VqTensor>& out, const std::string& prefix, int64_t cout, int64_t cin, int64_t k) {
  WeightBias(out, prefix, {cout, cin, k, k});
}

void GroupNorm(std::vector<VqTensor>& out, const std::string& prefix, int64_t channels) {
  WeightBias(out, prefix, {channels});
}

// LlamaGen ResnetBlock: norm1, conv1, norm2, conv2, and a 1x1 nin_shortcut when channels change.
void ResnetBlock(std::vector<VqTensor>& out, const std::string& p, int64_t cin, int64_t cout) {
  GroupNorm(out, p + ".norm1", cin);
  Conv(out, p + ".conv1", cout, cin, 3);
  GroupNorm(out, p + ".norm2", cout);
  Conv(out, p + ".conv2", cout, cout, 3);
  if (cin != cout) Conv(out, p + ".nin_shortcut", cout, cin, 1);
}

void AttnBlock(std::vector<VqTensor>& out, const std::string& p, int64_t c) {
  GroupNorm(out, p + ".norm", c);
  for (const char* name : {".q", ".k", ".v", ".proj_out"}) Conv(out, p + name, c, c, 1);
}

}  // namespace

std::vector<VqTensor> VqDecoderTensors(const Vq16Config& vq) {
  const std::string p = "gen_vision_model.";
  const int64_t levels = static_cast<int64_t>(vq.ch_mult.size());
  std::vector<VqTensor> out;
  out.push_back({p + "quantize.embedding.weight", {vq.codebook_size, vq.codebook_embed_dim}});
  Conv(out, p + "post_quant_conv", vq.z_channels, vq.codebook_embed_dim, 1);

  const std::string d = p + "decoder.";
  int64_t block_in = int64_t{vq.ch} * vq.ch_mult.back();
  Conv(out, d + "conv_in", block_in, vq.z_channels, 3);
  ResnetBlock(out, d + "mid.0", block_in, block_in);
  AttnBlock(out, d + "mid.1", block_in);
  ResnetBlock(out, d + "mid.2", block_in, block_in);
  // conv_blocks[i] serves resolution level (levels - 1 - i): deepest first.
  for (int64_t i = 0; i < levels; ++i) {
    const int64_t level = levels - 1 - i;
    const int64_t block_out = int64_t{vq.ch} * vq.ch_mult[level];
    const std::string b = absl::StrCat(d, "conv_blocks.", i, ".");
    for (int32_t j = 0; j <= vq.num_res_blocks; ++j) {
      ResnetBlock(out, absl::StrCat(b, "res.", j), block_in, block_out);
      block_in = block_out;
      if (level == levels - 1) AttnBlock(out, absl::StrCat(b, "attn.", j), block_in);
    }
    if (level != 0) Conv(out, b + "upsample.conv", block_in, block_in, 3);
  }
  GroupNorm(out, d + "norm_out", block_in);
  Conv(out, d + "conv_out", 3, block_in, 3);
  return out;
}

}  // namespace argen::vq
