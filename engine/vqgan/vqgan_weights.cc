#include "engine/vqgan/vqgan_weights.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace argen::vqgan {
namespace {

// Walks the decode path in model order. With a source it loads; without, it
// only records names and shapes.
class Walker {
 public:
  Walker(const TensorSource* source, std::string prefix) : source_(source), prefix_(std::move(prefix)) {}

  std::vector<std::pair<std::string, std::vector<int64_t>>>& names() { return names_; }

  absl::StatusOr<std::vector<float>> Raw(const std::string& name, std::vector<int64_t> shape) {
    names_.emplace_back(prefix_ + name, shape);
    if (source_ == nullptr) return std::vector<float>{};
    return (*source_)(prefix_ + name, shape);
  }

  absl::StatusOr<vq::Conv2dWeights> Conv(const std::string& name, int32_t cin, int32_t cout, int32_t k) {
    vq::Conv2dWeights c;
    c.cin = cin;
    c.cout = cout;
    c.kernel = k;
    auto w = Raw(name + ".weight", {cout, cin, k, k});
    if (!w.ok()) return w.status();
    auto b = Raw(name + ".bias", {cout});
    if (!b.ok()) return b.status();
    c.weight = std::move(*w);
    c.bias = std::move(*b);
    return c;
  }

  absl::StatusOr<vq::GroupNormWeights> Norm(const std::string& name, int32_t channels) {
    vq::GroupNormWeights n;
    n.channels = channels;
    auto g = Raw(name + ".weight", {channels});
    if (!g.ok()) return g.status();
    auto b = Raw(name + ".bias", {channels});
    if (!b.ok()) return b.status();
    n.gamma = std::move(*g);
    n.beta = std::move(*b);
    return n;
  }

  absl::StatusOr<vq::ResnetBlockWeights> Resnet(const std::string& name, int32_t cin, int32_t cout) {
    vq::ResnetBlockWeights r;
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

  absl::StatusOr<vq::AttnBlockWeights> Attn(const std::string& name, int32_t channels) {
    vq::AttnBlockWeights a;
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

 private:
  const TensorSource* source_;
  std::string prefix_;
  std::vector<std::pair<std::string, std::vector<int64_t>>> names_;
};

#define ARGEN_VQGAN_ASSIGN(lhs, expr) \
  do {                                \
    auto _r = (expr);                 \
    if (!_r.ok()) return _r.status(); \
    lhs = std::move(*_r);             \
  } while (0)

absl::StatusOr<VqganDecoderWeights> Walk(Walker& walk, const VqganConfig& c) {
  if (absl::Status s = ValidateVqganConfig(c, "VQGAN config"); !s.ok()) return s;
  VqganDecoderWeights w;
  w.n_embed = c.n_embed;
  w.embed_dim = c.embed_dim;
  if (c.quantized) {
    ARGEN_VQGAN_ASSIGN(w.codebook, walk.Raw("quantize.embedding.weight", {c.n_embed, c.embed_dim}));
    ARGEN_VQGAN_ASSIGN(w.post_quant_conv, walk.Conv("post_quant_conv", c.embed_dim, c.z_channels, 1));
  }
  int32_t width = c.width(c.levels() - 1);
  ARGEN_VQGAN_ASSIGN(w.conv_in, walk.Conv("decoder.conv_in", c.z_channels, width, 3));
  ARGEN_VQGAN_ASSIGN(w.mid_block_1, walk.Resnet("decoder.mid.block_1", width, width));
  if (c.attention) {
    vq::AttnBlockWeights a;
    ARGEN_VQGAN_ASSIGN(a, walk.Attn("decoder.mid.attn_1", width));
    w.mid_attn_1 = std::move(a);
  }
  ARGEN_VQGAN_ASSIGN(w.mid_block_2, walk.Resnet("decoder.mid.block_2", width, width));
  w.up.resize(c.levels());
  for (int32_t level = c.levels() - 1; level >= 0; --level) {
    const std::string base = absl::StrCat("decoder.up.", level);
    UpLevelWeights& up = w.up[level];
    const int32_t out = c.width(level);
    for (int32_t j = 0; j <= c.num_res_blocks; ++j) {
      vq::ResnetBlockWeights r;
      ARGEN_VQGAN_ASSIGN(r, walk.Resnet(absl::StrCat(base, ".block.", j), width, out));
      up.block.push_back(std::move(r));
      width = out;
      if (c.LevelHasAttention(level)) {
        vq::AttnBlockWeights a;
        ARGEN_VQGAN_ASSIGN(a, walk.Attn(absl::StrCat(base, ".attn.", j), width));
        up.attn.push_back(std::move(a));
      }
    }
    if (level != 0) {
      up.upsample_2x = true;
      if (c.resamp_with_conv) {
        vq::Conv2dWeights conv;
        ARGEN_VQGAN_ASSIGN(conv, walk.Conv(base + ".upsample.conv", width, width, 3));
        up.upsample = std::move(conv);
      }
    }
  }
  ARGEN_VQGAN_ASSIGN(w.norm_out, walk.Norm("decoder.norm_out", width));
  ARGEN_VQGAN_ASSIGN(w.conv_out, walk.Conv("decoder.conv_out", width, c.out_ch, 3));
  return w;
}

}  // namespace

TensorSource CheckpointTensorSource(const checkpoint::Checkpoint& checkpoint) {
  return [&checkpoint](const std::string& name, const std::vector<int64_t>& shape) {
    return checkpoint.LoadF32(name, shape);
  };
}

absl::StatusOr<VqganDecoderWeights> LoadVqganDecoderWeights(const TensorSource& source, const VqganConfig& config,
                                                            const std::string& prefix) {
  Walker walk(&source, prefix);
  return Walk(walk, config);
}

std::vector<std::pair<std::string, std::vector<int64_t>>> VqganDecoderTensors(const VqganConfig& config,
                                                                              const std::string& prefix) {
  Walker walk(nullptr, prefix);
  if (!Walk(walk, config).ok()) return {};
  return std::move(walk.names());
}

}  // namespace argen::vqgan
