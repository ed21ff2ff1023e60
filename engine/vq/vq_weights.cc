#include "engine/vq/vq_weights.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace argen::vq {
namespace {

// F.normalize(p=2, dim=-1): x / max(||x||, 1e-12).
void NormalizeRows(std::vector<float>& table, int32_t width) {
  const size_t rows = table.size() / static_cast<size_t>(width);
  for (size_t r = 0; r < rows; ++r) {
    float* row = table.data() + r * width;
    double sq = 0.0;
    for (int32_t i = 0; i < width; ++i) sq += static_cast<double>(row[i]) * row[i];
    const float inv = static_cast<float>(1.0 / std::max(std::sqrt(sq), 1e-12));
    for (int32_t i = 0; i < width; ++i) row[i] *= inv;
  }
}

class Loader {
 public:
  Loader(const checkpoint::Checkpoint& ckpt, std::string prefix) : ckpt_(ckpt), prefix_(std::move(prefix)) {}

  absl::StatusOr<Conv2dWeights> Conv(const std::string& name, int32_t cin, int32_t cout, int32_t kernel) {
    Conv2dWeights c;
    c.cin = cin;
    c.cout = cout;
    c.kernel = kernel;
    auto w = ckpt_.LoadF32(prefix_ + name + ".weight", {cout, cin, kernel, kernel});
    if (!w.ok()) return w.status();
    auto b = ckpt_.LoadF32(prefix_ + name + ".bias", {cout});
    if (!b.ok()) return b.status();
    c.weight = std::move(*w);
    c.bias = std::move(*b);
    return c;
  }

  absl::StatusOr<GroupNormWeights> Norm(const std::string& name, int32_t channels) {
    GroupNormWeights n;
    n.channels = channels;
    auto g = ckpt_.LoadF32(prefix_ + name + ".weight", {channels});
    if (!g.ok()) return g.status();
    auto b = ckpt_.LoadF32(prefix_ + name + ".bias", {channels});
    if (!b.ok()) return b.status();
    n.gamma = std::move(*g);
    n.beta = std::move(*b);
    return n;
  }

  absl::StatusOr<ResnetBlockWeights> Resnet(const std::string& name, int32_t cin, int32_t cout) {
    ResnetBlockWeights r;
    auto n1 = Norm(name + ".norm1", cin);
    if (!n1.ok()) return n1.status();
    auto c1 = Conv(name + ".conv1", cin, cout, 3);
    if (!c1.ok()) return c1.status();
    auto n2 = Norm(name + ".norm2", cout);
    if (!n2.ok()) return n2.status();
    auto c2 = Conv(name + ".conv2", cout, cout, 3);
    if (!c2.ok()) return c2.status();
    r.norm1 = std::move(*n1);
    r.conv1 = std::move(*c1);
    r.norm2 = std::move(*n2);
    r.conv2 = std::move(*c2);
    if (cin != cout) {
      auto s = Conv(name + ".nin_shortcut", cin, cout, 1);
      if (!s.ok()) return s.status();
      r.nin_shortcut = std::move(*s);
    }
    return r;
  }

  absl::StatusOr<AttnBlockWeights> Attn(const std::string& name, int32_t channels) {
    AttnBlockWeights a;
    auto n = Norm(name + ".norm", channels);
    if (!n.ok()) return n.status();
    a.norm = std::move(*n);
    for (auto [field, sub] :
         {std::pair{&a.q, ".q"}, std::pair{&a.k, ".k"}, std::pair{&a.v, ".v"}, std::pair{&a.proj_out, ".proj_out"}}) {
      auto c = Conv(name + sub, channels, channels, 1);
      if (!c.ok()) return c.status();
      *field = std::move(*c);
    }
    return a;
  }

  absl::StatusOr<std::vector<float>> Raw(const std::string& name, const std::vector<int64_t>& shape) {
    return ckpt_.LoadF32(prefix_ + name, shape);
  }

 private:
  const checkpoint::Checkpoint& ckpt_;
  std::string prefix_;
};

constexpr int64_t kMaxChannels = 16384;
constexpr int32_t kMaxResBlocks = 64;
constexpr int32_t kMaxImageSize = 2048;
constexpr int32_t kMaxTokenGrid = 64;

#define ARGEN_VQ_ASSIGN(lhs, expr)    \
  do {                                \
    auto _r = (expr);                 \
    if (!_r.ok()) return _r.status(); \
    lhs = std::move(*_r);             \
  } while (0)

}  // namespace

absl::Status ValidateVqConfig(const vq::Vq16Config& c) {
  auto bad = [](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("gen_vision_config: ", what));
  };
  if (c.codebook_size <= 0) return bad(absl::StrCat("codebook_size must be > 0, got ", c.codebook_size));
  if (c.codebook_embed_dim <= 0) return bad(absl::StrCat("codebook_embed_dim must be > 0, got ", c.codebook_embed_dim));
  if (c.z_channels <= 0) return bad(absl::StrCat("z_channels must be > 0, got ", c.z_channels));
  if (c.ch <= 0) return bad(absl::StrCat("ch must be > 0, got ", c.ch));
  if (c.num_res_blocks < 0) return bad(absl::StrCat("num_res_blocks must be >= 0, got ", c.num_res_blocks));
  if (c.num_groups <= 0) return bad(absl::StrCat("num_groups must be > 0, got ", c.num_groups));
  if (c.ch_mult.empty() || c.ch_mult.size() > 8)
    return bad(absl::StrCat("ch_mult must have 1..8 entries, got ", c.ch_mult.size()));
  for (int32_t m : c.ch_mult) {
    if (m <= 0 || (int64_t{c.ch} * m) % c.num_groups != 0)
      return bad(absl::StrCat("ch * ch_mult entry (", c.ch, " * ", m, ") must be a positive multiple of num_groups ",
                              c.num_groups));
  }
  if (c.image_size <= 0 || c.image_size % c.downsample() != 0)
    return bad(
        absl::StrCat("image_size ", c.image_size, " must be a positive multiple of the downsampling ", c.downsample()));
  // Bounds that keep every buffer size far from overflow and the scratch
  // allocatable (the attention scores grow with token_grid^4).
  if (c.ch > kMaxChannels || c.z_channels > kMaxChannels || c.codebook_embed_dim > kMaxChannels)
    return bad(absl::StrCat("ch, z_channels and codebook_embed_dim must be <= ", kMaxChannels));
  for (int32_t m : c.ch_mult) {
    if (int64_t{c.ch} * m > kMaxChannels)
      return bad(absl::StrCat("ch * ch_mult entry (", c.ch, " * ", m, ") must be <= ", kMaxChannels));
  }
  if (c.num_res_blocks > kMaxResBlocks) return bad(absl::StrCat("num_res_blocks must be <= ", kMaxResBlocks));
  if (c.image_size > kMaxImageSize || c.token_grid() > kMaxTokenGrid)
    return bad(absl::StrCat("image_size ", c.image_size, " too large: at most ", kMaxImageSize,
                            " px and a token grid of at most ", kMaxTokenGrid));
  return absl::OkStatus();
}

absl::StatusOr<VqDecoderWeights> LoadVqDecoderWeights(const checkpoint::Checkpoint& checkpoint,
                                                      const vq::Vq16Config& config, const std::string& prefix) {
  if (absl::Status s = ValidateVqConfig(config); !s.ok()) return s;
  Loader load(checkpoint, prefix);
  VqDecoderWeights w;
  w.codebook_size = config.codebook_size;
  w.embed_dim = config.codebook_embed_dim;
  ARGEN_VQ_ASSIGN(w.codebook, load.Raw("quantize.embedding.weight", {config.codebook_size, config.codebook_embed_dim}));
  if (config.codebook_l2_norm) NormalizeRows(w.codebook, config.codebook_embed_dim);
  ARGEN_VQ_ASSIGN(w.post_quant_conv, load.Conv("post_quant_conv", config.codebook_embed_dim, config.z_channels, 1));

  const int32_t levels = static_cast<int32_t>(config.ch_mult.size());
  int32_t width = config.ch * config.ch_mult.back();
  ARGEN_VQ_ASSIGN(w.conv_in, load.Conv("decoder.conv_in", config.z_channels, width, 3));
  ARGEN_VQ_ASSIGN(w.mid_res0, load.Resnet("decoder.mid.0", width, width));
  ARGEN_VQ_ASSIGN(w.mid_attn, load.Attn("decoder.mid.1", width));
  ARGEN_VQ_ASSIGN(w.mid_res1, load.Resnet("decoder.mid.2", width, width));
  for (int32_t i = 0; i < levels; ++i) {
    const int32_t level = levels - 1 - i;
    const int32_t out = config.ch * config.ch_mult[level];
    const std::string block = absl::StrCat("decoder.conv_blocks.", i);
    UpBlockWeights up;
    for (int32_t j = 0; j <= config.num_res_blocks; ++j) {
      ResnetBlockWeights r;
      ARGEN_VQ_ASSIGN(r, load.Resnet(absl::StrCat(block, ".res.", j), width, out));
      up.res.push_back(std::move(r));
      width = out;
      if (i == 0) {
        AttnBlockWeights a;
        ARGEN_VQ_ASSIGN(a, load.Attn(absl::StrCat(block, ".attn.", j), width));
        up.attn.push_back(std::move(a));
      }
    }
    if (level != 0) {
      Conv2dWeights c;
      ARGEN_VQ_ASSIGN(c, load.Conv(block + ".upsample.conv", width, width, 3));
      up.upsample = std::move(c);
    }
    w.blocks.push_back(std::move(up));
  }
  ARGEN_VQ_ASSIGN(w.norm_out, load.Norm("decoder.norm_out", width));
  ARGEN_VQ_ASSIGN(w.conv_out, load.Conv("decoder.conv_out", width, 3, 3));
  return w;
}

}  // namespace argen::vq
