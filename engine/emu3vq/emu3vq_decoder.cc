#include "engine/emu3vq/emu3vq_decoder.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/vq/conv2d.h"
#include "engine/vq/group_norm.h"
#include "engine/vq/pixels.h"
#include "engine/vq/spatial_attention.h"

namespace argen::emu3vq {
namespace {

// im2col band budget (floats), as the other decoders.
constexpr size_t kColBudgetFloats = size_t{8} << 20;

using Act = std::vector<float>;  // one CHW activation

float Swish(float x) { return x / (1.0f + std::exp(-x)); }

// The running state of one image: its size, the activation, the condition zq
// (at the latent resolution) and scratch.
class Pass {
 public:
  Pass(int32_t h, int32_t w, parallel::ThreadPool* pool) : h_(h), w_(w), pool_(pool) {}

  int32_t h() const { return h_; }
  int32_t w() const { return w_; }
  size_t hw() const { return static_cast<size_t>(h_) * w_; }

  Act Conv(const vq::Conv2dWeights& c, const Act& in) {
    Act out(static_cast<size_t>(c.cout) * hw());
    const size_t col_floats = c.kernel == 1 ? 0 : vq::Conv2dScratchFloats(c, h_, w_, kColBudgetFloats);
    if (col_.size() < col_floats) col_.resize(col_floats);
    vq::Conv2d(c, in.data(), h_, w_, out.data(), /*accumulate=*/false, col_.data(), col_floats, pool_);
    return out;
  }

  // GroupNorm(x) * conv_y(zq') + conv_b(zq'), zq' = zq nearest-resized from (zh, zw) to this size.
  Act SpatialNorm(const SpatialNormWeights& n, const Act& x, const Act& zq, int32_t zh, int32_t zw) {
    const int32_t zc = n.conv_y.cin;
    Act up(static_cast<size_t>(zc) * hw());
    for (int32_t c = 0; c < zc; ++c) {
      for (int32_t y = 0; y < h_; ++y) {
        // F.interpolate(size=..., mode="nearest"): src = floor(dst * in / out).
        const int32_t sy = static_cast<int32_t>(static_cast<int64_t>(y) * zh / h_);
        for (int32_t xx = 0; xx < w_; ++xx) {
          const int32_t sx = static_cast<int32_t>(static_cast<int64_t>(xx) * zw / w_);
          up[(static_cast<size_t>(c) * h_ + y) * w_ + xx] = zq[(static_cast<size_t>(c) * zh + sy) * zw + sx];
        }
      }
    }
    Act out(x.size());
    vq::GroupNorm(n.norm, kGroupNormGroups, x.data(), hw(), out.data(), /*swish=*/false, pool_);
    const Act scale = Conv(n.conv_y, up);
    const Act shift = Conv(n.conv_b, up);
    for (size_t i = 0; i < out.size(); ++i) out[i] = out[i] * scale[i] + shift[i];
    return out;
  }

  Act Resnet(const SpatialResnetWeights& r, const Act& x, const Act& zq, int32_t zh, int32_t zw) {
    Act t = SpatialNorm(r.norm1, x, zq, zh, zw);
    for (float& v : t) v = Swish(v);
    t = Conv(r.conv1, t);
    t = SpatialNorm(r.norm2, t, zq, zh, zw);
    for (float& v : t) v = Swish(v);
    t = Conv(r.conv2, t);
    if (r.nin_shortcut) {
      const Act s = Conv(*r.nin_shortcut, x);
      for (size_t i = 0; i < t.size(); ++i) t[i] += s[i];
    } else {
      for (size_t i = 0; i < t.size(); ++i) t[i] += x[i];
    }
    return t;
  }

  Act Attention(const SpatialAttnWeights& a, const Act& x, const Act& zq, int32_t zh, int32_t zw) {
    const Act n = SpatialNorm(a.norm, x, zq, zh, zw);
    const Act q = Conv(a.q, n), k = Conv(a.k, n), v = Conv(a.v, n);
    const int32_t c = a.q.cout;
    const int32_t cells = static_cast<int32_t>(hw());
    scores_.resize(static_cast<size_t>(cells) * cells);
    Act o(q.size());
    vq::SpatialAttention(q.data(), k.data(), v.data(), c, cells, scores_.data(), o.data(), pool_);
    Act out = Conv(a.proj_out, o);
    for (size_t i = 0; i < out.size(); ++i) out[i] += x[i];
    return out;
  }

  Act Upsample(const Act& x, int32_t channels) {
    Act out(x.size() * 4);
    vq::UpsampleNearest2x(x.data(), channels, h_, w_, out.data(), pool_);
    h_ *= 2;
    w_ *= 2;
    return out;
  }

 private:
  int32_t h_, w_;
  parallel::ThreadPool* pool_;
  std::vector<float> col_, scores_;
};

// The reduced temporal path on one latent-resolution tensor: each
// TemporalResnetBlock (BatchNorm affine, swish, conv; twice; residual), then
// each temporal upsample's conv followed by swish.
Act TemporalPath(const Emu3VqWeights& w, Pass& pass, Act x) {
  const size_t hw = pass.hw();
  auto affine_swish = [hw](const ChannelAffine& a, const Act& in) {
    Act out(in.size());
    for (size_t c = 0; c < a.scale.size(); ++c) {
      for (size_t i = 0; i < hw; ++i) out[c * hw + i] = Swish(in[c * hw + i] * a.scale[c] + a.shift[c]);
    }
    return out;
  };
  for (const TemporalResnetWeights& t : w.time_res_stack) {
    Act h = pass.Conv(t.conv1, affine_swish(t.norm1, x));
    h = pass.Conv(t.conv2, affine_swish(t.norm2, h));
    for (size_t i = 0; i < h.size(); ++i) h[i] += x[i];
    x = std::move(h);
  }
  for (const vq::Conv2dWeights& c : w.time_conv) {
    x = pass.Conv(c, x);
    for (float& v : x) v = Swish(v);
  }
  return x;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Emu3VqDecoder>> Emu3VqDecoder::Create(Emu3VqWeights weights, const Emu3VqConfig& config,
                                                                     int32_t max_cells, int32_t threads) {
  if (absl::Status s = ValidateEmu3VqConfig(config, "Emu3 vision tokenizer config"); !s.ok()) return s;
  if (threads < 0)
    return absl::InvalidArgumentError(absl::StrCat("Emu3VqDecoder: threads must be >= 0, got ", threads));
  if (max_cells <= 0) return absl::InvalidArgumentError("Emu3VqDecoder: max_cells must be positive");
  if (weights.codebook.size() != static_cast<size_t>(config.codebook_size) * config.embed_dim ||
      weights.up.size() != static_cast<size_t>(config.levels())) {
    return absl::InvalidArgumentError("Emu3VqDecoder: weights do not match the config");
  }
  if (threads == 0) threads = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  return std::unique_ptr<Emu3VqDecoder>(new Emu3VqDecoder(std::move(weights), config, max_cells, threads));
}

Emu3VqDecoder::Emu3VqDecoder(Emu3VqWeights weights, const Emu3VqConfig& config, int32_t max_cells, int32_t threads)
    : weights_(std::move(weights)), config_(config), max_cells_(max_cells), pool_(threads) {}

absl::Status ValidateCodeGrid(const CodeGrid& g, size_t index, int32_t max_cells, int32_t codebook_size) {
  if (g.height <= 0 || g.width <= 0 || static_cast<int64_t>(g.height) * g.width > max_cells ||
      g.codes.size() != static_cast<size_t>(g.height) * g.width) {
    return absl::InvalidArgumentError(absl::StrCat("grids[", index, "]: ", g.height, " x ", g.width, " with ",
                                                   g.codes.size(), " codes (needs height * width codes, at most ",
                                                   max_cells, ")"));
  }
  for (size_t i = 0; i < g.codes.size(); ++i) {
    if (g.codes[i] < 0 || g.codes[i] >= codebook_size) {
      return absl::InvalidArgumentError(
          absl::StrCat("grids[", index, "][", i, "]: code ", g.codes[i], " outside [0, ", codebook_size, ")"));
    }
  }
  return absl::OkStatus();
}

std::vector<float> Emu3VqDecoder::Run(const CodeGrid& grid) {
  const Emu3VqWeights& w = weights_;
  const int32_t zh = grid.height, zw = grid.width, e = config_.embed_dim;
  Pass pass(zh, zw, &pool_);
  const size_t cells = pass.hw();
  Act quant(static_cast<size_t>(e) * cells);  // CHW codebook vectors
  for (size_t i = 0; i < cells; ++i) {
    const float* row = w.codebook.data() + static_cast<size_t>(grid.codes[i]) * e;
    for (int32_t c = 0; c < e; ++c) quant[c * cells + i] = row[c];
  }
  Act h = TemporalPath(w, pass, pass.Conv(w.post_quant_conv, quant));
  const Act zq = TemporalPath(w, pass, quant);

  h = pass.Conv(w.conv_in, h);
  h = pass.Resnet(w.mid_block_1, h, zq, zh, zw);
  h = pass.Attention(w.mid_attn_1, h, zq, zh, zw);
  h = pass.Resnet(w.mid_block_2, h, zq, zh, zw);
  for (int32_t level = config_.levels() - 1; level >= 0; --level) {
    const UpLevelWeights& l = w.up[level];
    for (size_t i = 0; i < l.block.size(); ++i) {
      h = pass.Resnet(l.block[i], h, zq, zh, zw);
      if (!l.attn.empty()) h = pass.Attention(l.attn[i], h, zq, zh, zw);
    }
    if (l.upsample) {
      h = pass.Upsample(h, l.upsample->cin);
      h = pass.Conv(*l.upsample, h);
    }
  }
  h = pass.SpatialNorm(w.norm_out, h, zq, zh, zw);
  for (float& v : h) v = Swish(v);
  return pass.Conv(w.conv_out, h);
}

absl::Status Emu3VqDecoder::DecodeToFloat(const CodeGrid& grid, std::vector<float>* chw) {
  if (absl::Status s = ValidateCodeGrid(grid, 0, max_cells_, config_.codebook_size); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  *chw = Run(grid);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<engine::RgbImage>> Emu3VqDecoder::Decode(const std::vector<CodeGrid>& grids) {
  for (size_t i = 0; i < grids.size(); ++i) {
    if (absl::Status s = ValidateCodeGrid(grids[i], i, max_cells_, config_.codebook_size); !s.ok()) return s;
  }
  const int32_t f = config_.spatial_factor();
  std::vector<engine::RgbImage> images(grids.size());
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < grids.size(); ++i) {
    const std::vector<float> out = Run(grids[i]);
    images[i].width = grids[i].width * f;
    images[i].height = grids[i].height * f;
    images[i].rgb.resize(3 * static_cast<size_t>(images[i].width) * images[i].height);
    vq::ChwToRgb8(out.data(), images[i].height, images[i].width, images[i].rgb.data(), &pool_);
  }
  return images;
}

}  // namespace argen::emu3vq
