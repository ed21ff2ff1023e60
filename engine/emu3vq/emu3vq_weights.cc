#include "engine/emu3vq/emu3vq_weights.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace argen::emu3vq {
namespace {

// Walks the decode path in model order. With a source it loads; without, it
// only records names and shapes.
class Walker {
 public:
  Walker(const TensorSource* source, Emu3VqNaming naming, std::string prefix)
      : source_(source), naming_(naming), prefix_(std::move(prefix)) {}

  std::vector<std::pair<std::string, std::vector<int64_t>>>& names() { return names_; }
  bool baai() const { return naming_ == Emu3VqNaming::kBaai; }

  absl::StatusOr<std::vector<float>> Raw(const std::string& name, std::vector<int64_t> shape) {
    names_.emplace_back(prefix_ + name, shape);
    if (source_ == nullptr) return std::vector<float>(0);
    return (*source_)(prefix_ + name, shape);
  }

  // A Conv2d (k x k) or a Linear (k == 0: [cout, cin], used as a 1x1 conv).
  absl::StatusOr<vq::Conv2dWeights> Conv(const std::string& name, int32_t cin, int32_t cout, int32_t k) {
    vq::Conv2dWeights c;
    c.cin = cin;
    c.cout = cout;
    c.kernel = k == 0 ? 1 : k;
    std::vector<int64_t> shape = k == 0 ? std::vector<int64_t>{cout, cin} : std::vector<int64_t>{cout, cin, k, k};
    auto w = Raw(name + ".weight", shape);
    if (!w.ok()) return w.status();
    auto b = Raw(name + ".bias", {cout});
    if (!b.ok()) return b.status();
    c.weight = std::move(*w);
    c.bias = std::move(*b);
    return c;
  }

  // A causal Conv3d (kernel (kt, k, k), stored as <name>.conv.*): its last temporal tap as a 2-D conv.
  absl::StatusOr<vq::Conv2dWeights> CausalConv3d(const std::string& name, int32_t cin, int32_t cout, int32_t kt,
                                                 int32_t k) {
    vq::Conv2dWeights c;
    c.cin = cin;
    c.cout = cout;
    c.kernel = k;
    auto w = Raw(name + ".conv.weight", {cout, cin, kt, k, k});
    if (!w.ok()) return w.status();
    auto b = Raw(name + ".conv.bias", {cout});
    if (!b.ok()) return b.status();
    c.bias = std::move(*b);
    if (source_ != nullptr) {
      const size_t taps = static_cast<size_t>(k) * k;
      c.weight.resize(static_cast<size_t>(cout) * cin * taps);
      for (size_t oc = 0; oc < static_cast<size_t>(cout) * cin; ++oc) {
        const float* tap = w->data() + (oc * kt + (kt - 1)) * taps;
        std::copy(tap, tap + taps, c.weight.data() + oc * taps);
      }
    }
    return c;
  }

  absl::StatusOr<ChannelAffine> BatchNorm(const std::string& name, int32_t channels) {
    std::vector<float> v[4];
    const char* parts[4] = {".weight", ".bias", ".running_mean", ".running_var"};
    for (int i = 0; i < 4; ++i) {
      auto t = Raw(name + parts[i], {channels});
      if (!t.ok()) return t.status();
      v[i] = std::move(*t);
    }
    ChannelAffine a;
    if (source_ == nullptr) return a;
    a.scale.resize(channels);
    a.shift.resize(channels);
    for (int32_t c = 0; c < channels; ++c) {
      a.scale[c] = v[0][c] / std::sqrt(v[3][c] + kBatchNormEps);
      a.shift[c] = v[1][c] - v[2][c] * a.scale[c];
    }
    return a;
  }

  absl::StatusOr<vq::GroupNormWeights> GroupNorm(const std::string& name, int32_t channels) {
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

  absl::StatusOr<SpatialNormWeights> SpatialNorm(const std::string& name, int32_t channels, int32_t zq) {
    SpatialNormWeights s;
    auto n = GroupNorm(name + ".norm_layer", channels);
    if (!n.ok()) return n.status();
    auto y = Conv(name + ".conv_y", zq, channels, 1);
    if (!y.ok()) return y.status();
    auto b = Conv(name + ".conv_b", zq, channels, 1);
    if (!b.ok()) return b.status();
    s.norm = std::move(*n);
    s.conv_y = std::move(*y);
    s.conv_b = std::move(*b);
    return s;
  }

  absl::StatusOr<SpatialResnetWeights> Resnet(const std::string& name, int32_t cin, int32_t cout, int32_t zq) {
    SpatialResnetWeights r;
    auto n1 = SpatialNorm(name + ".norm1", cin, zq);
    if (!n1.ok()) return n1.status();
    auto c1 = Conv(name + ".conv1", cin, cout, 3);
    if (!c1.ok()) return c1.status();
    auto n2 = SpatialNorm(name + ".norm2", cout, zq);
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

  // BAAI: <block>.{norm, q, k, v, proj_out} (1x1 convs); transformers:
  // <block>.{q_proj, k_proj, v_proj, out_proj} (Linear) and the norm at `hf_norm`.
  absl::StatusOr<SpatialAttnWeights> Attn(const std::string& block, const std::string& hf_norm, int32_t channels,
                                          int32_t zq) {
    SpatialAttnWeights a;
    auto n = SpatialNorm(baai() ? block + ".norm" : hf_norm, channels, zq);
    if (!n.ok()) return n.status();
    a.norm = std::move(*n);
    const char* baai_names[4] = {".q", ".k", ".v", ".proj_out"};
    const char* hf_names[4] = {".q_proj", ".k_proj", ".v_proj", ".out_proj"};
    vq::Conv2dWeights* fields[4] = {&a.q, &a.k, &a.v, &a.proj_out};
    for (int i = 0; i < 4; ++i) {
      auto c = baai() ? Conv(block + baai_names[i], channels, channels, 1)
                      : Conv(block + hf_names[i], channels, channels, 0);
      if (!c.ok()) return c.status();
      *fields[i] = std::move(*c);
    }
    return a;
  }

 private:
  const TensorSource* source_;
  Emu3VqNaming naming_;
  std::string prefix_;
  std::vector<std::pair<std::string, std::vector<int64_t>>> names_;
};

absl::StatusOr<Emu3VqWeights> Walk(Walker& walk, const Emu3VqConfig& c) {
  Emu3VqWeights w;
  const int32_t zq = c.embed_dim, z = c.z_channels;
  auto codebook = walk.Raw("quantize.embedding.weight", {c.codebook_size, c.embed_dim});
  if (!codebook.ok()) return codebook.status();
  w.codebook = std::move(*codebook);
  auto pq = walk.CausalConv3d("post_quant_conv", c.embed_dim, z, 3, 1);
  if (!pq.ok()) return pq.status();
  w.post_quant_conv = std::move(*pq);
  for (int32_t i = 0; i < c.num_res_blocks; ++i) {
    const std::string p = absl::StrCat("decoder.time_res_stack.", i);
    TemporalResnetWeights t;
    auto n1 = walk.BatchNorm(p + ".norm1", z);
    if (!n1.ok()) return n1.status();
    auto c1 = walk.CausalConv3d(p + ".conv1", z, z, 3, 3);
    if (!c1.ok()) return c1.status();
    auto n2 = walk.BatchNorm(p + ".norm2", z);
    if (!n2.ok()) return n2.status();
    auto c2 = walk.CausalConv3d(p + ".conv2", z, z, 3, 3);
    if (!c2.ok()) return c2.status();
    t.norm1 = std::move(*n1);
    t.conv1 = std::move(*c1);
    t.norm2 = std::move(*n2);
    t.conv2 = std::move(*c2);
    w.time_res_stack.push_back(std::move(t));
  }
  for (int32_t i = 0; i < c.temporal_upsamples(); ++i) {
    auto t = walk.CausalConv3d(absl::StrCat("decoder.time_conv.", i, ".conv"), z, z, 3, 3);
    if (!t.ok()) return t.status();
    w.time_conv.push_back(std::move(*t));
  }
  int32_t block_in = c.block_in();
  auto conv_in = walk.Conv("decoder.conv_in", z, block_in, 3);
  if (!conv_in.ok()) return conv_in.status();
  w.conv_in = std::move(*conv_in);
  const std::string mid = walk.baai() ? "decoder.mid" : "decoder.middle_block";
  auto b1 = walk.Resnet(mid + ".block_1", block_in, block_in, zq);
  if (!b1.ok()) return b1.status();
  w.mid_block_1 = std::move(*b1);
  auto a1 = walk.Attn(mid + ".attn_1", mid + ".attn_norm", block_in, zq);
  if (!a1.ok()) return a1.status();
  w.mid_attn_1 = std::move(*a1);
  auto b2 = walk.Resnet(mid + ".block_2", block_in, block_in, zq);
  if (!b2.ok()) return b2.status();
  w.mid_block_2 = std::move(*b2);
  w.up.resize(c.levels());
  const std::string up = walk.baai() ? "decoder.up." : "decoder.up_block.up.";
  for (int32_t level = c.levels() - 1; level >= 0; --level) {
    const std::string p = absl::StrCat(up, level);
    UpLevelWeights& l = w.up[level];
    const int32_t block_out = c.ch * c.ch_mult[level];
    for (int32_t i = 0; i <= c.num_res_blocks; ++i) {
      auto r = walk.Resnet(absl::StrCat(p, ".block.", i), block_in, block_out, zq);
      if (!r.ok()) return r.status();
      l.block.push_back(std::move(*r));
      block_in = block_out;
      if (c.HasAttention(level)) {
        auto a = walk.Attn(absl::StrCat(p, ".attn.", i), absl::StrCat(p, ".attn_norms.", i), block_in, zq);
        if (!a.ok()) return a.status();
        l.attn.push_back(std::move(*a));
      }
    }
    if (level != 0) {
      auto u = walk.Conv(p + ".upsample.conv", block_in, block_in, 3);
      if (!u.ok()) return u.status();
      l.upsample = std::move(*u);
    }
  }
  auto norm_out = walk.SpatialNorm("decoder.norm_out", block_in, zq);
  if (!norm_out.ok()) return norm_out.status();
  w.norm_out = std::move(*norm_out);
  auto conv_out = walk.Conv("decoder.conv_out", block_in, c.out_channels, 3);
  if (!conv_out.ok()) return conv_out.status();
  w.conv_out = std::move(*conv_out);
  return w;
}

}  // namespace

TensorSource CheckpointTensorSource(const checkpoint::Checkpoint& checkpoint) {
  return [&checkpoint](const std::string& name, const std::vector<int64_t>& shape) {
    return checkpoint.LoadF32(name, shape);
  };
}

absl::StatusOr<Emu3VqWeights> LoadEmu3VqWeights(const TensorSource& source, const Emu3VqConfig& config,
                                                Emu3VqNaming naming, const std::string& prefix) {
  if (absl::Status s = ValidateEmu3VqConfig(config, "Emu3 vision tokenizer config"); !s.ok()) return s;
  Walker walk(&source, naming, prefix);
  return Walk(walk, config);
}

std::vector<std::pair<std::string, std::vector<int64_t>>> Emu3VqTensorNames(const Emu3VqConfig& config,
                                                                            Emu3VqNaming naming,
                                                                            const std::string& prefix) {
  Walker walk(nullptr, naming, prefix);
  (void)Walk(walk, config);
  return std::move(walk.names());
}

}  // namespace argen::emu3vq
