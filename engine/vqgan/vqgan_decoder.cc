#include "engine/vqgan/vqgan_decoder.h"

#include <algorithm>
#include <cmath>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/vq/conv2d.h"
#include "engine/vq/group_norm.h"
#include "engine/vq/pixels.h"
#include "engine/vq/spatial_attention.h"

namespace argen::vqgan {
namespace {

// im2col band budget (floats), as the VQ-16 decoder.
constexpr size_t kColBudgetFloats = size_t{8} << 20;
constexpr size_t kMaxScratchBytes = size_t{8} << 30;

// Largest activation, im2col band and attention over the whole decode, for
// grids of at most `cells` codes and `side` codes on a side.
struct ScratchPlan {
  size_t act = 0, col = 0, attn_act = 0, scores = 0;
  void Conv(const vq::Conv2dWeights& c, size_t cells, int32_t side) {
    act = std::max({act, c.cin * cells, c.cout * cells});
    col = std::max(col, vq::Conv2dScratchFloats(c, side, side, kColBudgetFloats));
  }
  void Resnet(const vq::ResnetBlockWeights& r, size_t cells, int32_t side) {
    Conv(r.conv1, cells, side);
    Conv(r.conv2, cells, side);
    if (r.nin_shortcut) Conv(*r.nin_shortcut, cells, side);
  }
  void Attn(const vq::AttnBlockWeights& a, size_t cells) {
    attn_act = std::max(attn_act, static_cast<size_t>(a.q.cout) * cells);
    scores = std::max(scores, cells * cells);
  }
  size_t Bytes() const;
};

bool SameShape(const vq::Conv2dWeights& c, int32_t cin, int32_t cout, int32_t k) {
  return c.cin == cin && c.cout == cout && c.kernel == k &&
         c.weight.size() == static_cast<size_t>(cout) * cin * k * k && c.bias.size() == static_cast<size_t>(cout);
}

ScratchPlan PlanScratch(const VqganDecoderWeights& weights, const VqganConfig& config, DecodeLimits limits);

}  // namespace

absl::StatusOr<std::unique_ptr<VqganDecoder>> VqganDecoder::Create(VqganDecoderWeights weights,
                                                                   const VqganConfig& config, DecodeLimits limits,
                                                                   int32_t threads) {
  if (threads < 0) return absl::InvalidArgumentError(absl::StrCat("VqganDecoder: threads must be >= 0, got ", threads));
  if (absl::Status s = ValidateVqganConfig(config, "VqganDecoder config"); !s.ok()) return s;
  if (limits.max_cells <= 0 || limits.max_side <= 0 || limits.max_side > (1 << 12) ||
      static_cast<int64_t>(limits.max_cells) > int64_t{limits.max_side} * limits.max_side) {
    return absl::InvalidArgumentError(absl::StrCat("VqganDecoder: limits need 0 < max_cells <= max_side^2 and ",
                                                   "max_side <= 4096, got max_cells ", limits.max_cells, ", max_side ",
                                                   limits.max_side));
  }
  const bool quantizer_matches =
      !config.quantized || (weights.n_embed == config.n_embed && weights.embed_dim == config.embed_dim &&
                            weights.codebook.size() == static_cast<size_t>(config.n_embed) * config.embed_dim &&
                            SameShape(weights.post_quant_conv, config.embed_dim, config.z_channels, 1));
  if (!quantizer_matches || weights.up.size() != static_cast<size_t>(config.levels()) ||
      !SameShape(weights.conv_in, config.z_channels, config.width(config.levels() - 1), 3) ||
      !SameShape(weights.conv_out, config.width(0), config.out_ch, 3) ||
      weights.mid_attn_1.has_value() != config.attention) {
    return absl::InvalidArgumentError(
        "VqganDecoder: weights do not match the VQGAN config (codebook, levels or widths)");
  }
  if (const size_t bytes = PlanScratch(weights, config, limits).Bytes(); bytes > kMaxScratchBytes) {
    return absl::ResourceExhaustedError(absl::StrCat("VqganDecoder: grids of up to ", limits.max_cells, " codes need ",
                                                     bytes >> 20, " MiB of scratch, over the ", kMaxScratchBytes >> 20,
                                                     " MiB cap"));
  }
  if (threads == 0) threads = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  return std::unique_ptr<VqganDecoder>(new VqganDecoder(std::move(weights), config, limits, threads));
}

namespace {

ScratchPlan PlanScratch(const VqganDecoderWeights& weights, const VqganConfig& config, DecodeLimits limits) {
  ScratchPlan plan;
  size_t cells = static_cast<size_t>(limits.max_cells);
  int32_t side = limits.max_side;
  if (config.quantized) {
    plan.act = static_cast<size_t>(config.embed_dim) * cells;  // the codebook rows
    plan.Conv(weights.post_quant_conv, cells, side);
  } else {
    plan.act = static_cast<size_t>(config.z_channels) * cells;  // the latent
  }
  plan.Conv(weights.conv_in, cells, side);
  plan.Resnet(weights.mid_block_1, cells, side);
  if (weights.mid_attn_1) plan.Attn(*weights.mid_attn_1, cells);
  plan.Resnet(weights.mid_block_2, cells, side);
  for (int32_t level = config.levels() - 1; level >= 0; --level) {
    const UpLevelWeights& up = weights.up[level];
    for (const vq::ResnetBlockWeights& r : up.block) plan.Resnet(r, cells, side);
    for (const vq::AttnBlockWeights& a : up.attn) plan.Attn(a, cells);
    if (up.upsample_2x) {
      cells *= 4;
      side *= 2;
      plan.act = std::max(plan.act, static_cast<size_t>(up.block.back().conv2.cout) * cells);
      if (up.upsample) plan.Conv(*up.upsample, cells, side);
    }
  }
  plan.Conv(weights.conv_out, cells, side);
  return plan;
}

size_t ScratchPlan::Bytes() const { return sizeof(float) * (3 * act + col + 3 * attn_act + scores); }

}  // namespace

VqganDecoder::VqganDecoder(VqganDecoderWeights weights, const VqganConfig& config, DecodeLimits limits, int32_t threads)
    : weights_(std::move(weights)), config_(config), limits_(limits), pool_(threads) {
  const ScratchPlan plan = PlanScratch(weights_, config_, limits_);
  x_.resize(plan.act);
  a_.resize(plan.act);
  b_.resize(plan.act);
  col_.resize(plan.col);
  q_.resize(plan.attn_act);
  k_.resize(plan.attn_act);
  v_.resize(plan.attn_act);
  scores_.resize(plan.scores);
  planned_bytes_ = plan.Bytes();
}

size_t VqganDecoder::scratch_bytes() const { return planned_bytes_; }

absl::Status VqganDecoder::ValidateSize(int32_t height, int32_t width, size_t index) const {
  const auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("VQGAN decode: grid ", index, ": ", what));
  };
  if (height <= 0 || width <= 0) return bad(absl::StrCat("size ", height, " x ", width, " is not positive"));
  if (std::max(height, width) > limits_.max_side || int64_t{height} * width > limits_.max_cells) {
    return bad(absl::StrCat(height, " x ", width, " codes is larger than this decoder allows (", limits_.max_cells,
                            " codes, ", limits_.max_side, " on a side)"));
  }
  return absl::OkStatus();
}

absl::Status VqganDecoder::ValidateGrid(const CodeGrid& grid, size_t index) const {
  const auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(absl::StrCat("VQGAN decode: grid ", index, ": ", what));
  };
  if (!config_.quantized) {
    return absl::FailedPreconditionError("VQGAN decode: this decoder has no codebook (it decodes latents)");
  }
  if (absl::Status s = ValidateSize(grid.height, grid.width, index); !s.ok()) return s;
  if (grid.codes.size() != static_cast<size_t>(grid.height) * grid.width) {
    return bad(absl::StrCat(grid.codes.size(), " codes for a ", grid.height, " x ", grid.width, " grid"));
  }
  for (size_t p = 0; p < grid.codes.size(); ++p) {
    if (grid.codes[p] < 0 || grid.codes[p] >= config_.n_embed) {
      return bad(
          absl::StrCat("position ", p, ": code ", grid.codes[p], " outside the codebook [0, ", config_.n_embed, ")"));
    }
  }
  return absl::OkStatus();
}

void VqganDecoder::ResnetBlock(const vq::ResnetBlockWeights& w, int32_t h, int32_t wd) {
  const size_t hw = static_cast<size_t>(h) * wd;
  vq::GroupNorm(w.norm1, kGroupNormGroups, x_.data(), hw, a_.data(), /*swish=*/true, &pool_);
  vq::Conv2d(w.conv1, a_.data(), h, wd, b_.data(), false, col_.data(), col_.size(), &pool_);
  // (dropout sits here in training; identity at inference)
  vq::GroupNorm(w.norm2, kGroupNormGroups, b_.data(), hw, b_.data(), /*swish=*/true, &pool_);
  vq::Conv2d(w.conv2, b_.data(), h, wd, a_.data(), false, col_.data(), col_.size(), &pool_);
  if (w.nin_shortcut) {
    vq::Conv2d(*w.nin_shortcut, x_.data(), h, wd, a_.data(), /*accumulate=*/true, col_.data(), col_.size(), &pool_);
  } else {
    float* a = a_.data();
    const float* x = x_.data();
    parallel::ParallelForRange(&pool_, static_cast<int64_t>(w.conv2.cout) * static_cast<int64_t>(hw),
                               [&](int64_t b, int64_t e) {
                                 for (int64_t i = b; i < e; ++i) a[i] += x[i];
                               });
  }
  std::swap(x_, a_);
}

void VqganDecoder::AttnBlock(const vq::AttnBlockWeights& w, int32_t h, int32_t wd) {
  const size_t hw = static_cast<size_t>(h) * wd;
  vq::GroupNorm(w.norm, kGroupNormGroups, x_.data(), hw, a_.data(), /*swish=*/false, &pool_);
  vq::Conv2d(w.q, a_.data(), h, wd, q_.data(), false, nullptr, 0, &pool_);
  vq::Conv2d(w.k, a_.data(), h, wd, k_.data(), false, nullptr, 0, &pool_);
  vq::Conv2d(w.v, a_.data(), h, wd, v_.data(), false, nullptr, 0, &pool_);
  vq::SpatialAttention(q_.data(), k_.data(), v_.data(), w.q.cout, static_cast<int32_t>(hw), scores_.data(), a_.data(),
                       &pool_);
  vq::Conv2d(w.proj_out, a_.data(), h, wd, x_.data(), /*accumulate=*/true, nullptr, 0, &pool_);
}

const float* VqganDecoder::Run(const CodeGrid& grid) {
  int32_t h = grid.height, w = grid.width;
  const size_t cells = static_cast<size_t>(h) * w;
  const int32_t e = weights_.embed_dim;
  // Codebook rows, transposed to CHW: b_[c, p] = codebook[codes[p], c].
  for (size_t p = 0; p < cells; ++p) {
    const float* row = weights_.codebook.data() + static_cast<size_t>(grid.codes[p]) * e;
    for (int32_t c = 0; c < e; ++c) b_[c * cells + p] = row[c];
  }
  vq::Conv2d(weights_.post_quant_conv, b_.data(), h, w, a_.data(), false, nullptr, 0, &pool_);
  return RunDecoder(h, w);
}

const float* VqganDecoder::RunDecoder(int32_t h, int32_t w) {
  vq::Conv2d(weights_.conv_in, a_.data(), h, w, x_.data(), false, col_.data(), col_.size(), &pool_);
  ResnetBlock(weights_.mid_block_1, h, w);
  if (weights_.mid_attn_1) AttnBlock(*weights_.mid_attn_1, h, w);
  ResnetBlock(weights_.mid_block_2, h, w);
  for (int32_t level = config_.levels() - 1; level >= 0; --level) {
    const UpLevelWeights& up = weights_.up[level];
    for (size_t j = 0; j < up.block.size(); ++j) {
      ResnetBlock(up.block[j], h, w);
      if (!up.attn.empty()) AttnBlock(up.attn[j], h, w);
    }
    if (up.upsample_2x) {
      const int32_t channels = up.block.back().conv2.cout;
      vq::UpsampleNearest2x(x_.data(), channels, h, w, up.upsample ? a_.data() : b_.data(), &pool_);
      h *= 2;
      w *= 2;
      if (up.upsample) {
        vq::Conv2d(*up.upsample, a_.data(), h, w, x_.data(), false, col_.data(), col_.size(), &pool_);
      } else {
        std::swap(x_, b_);
      }
    }
  }
  const size_t hw = static_cast<size_t>(h) * w;
  vq::GroupNorm(weights_.norm_out, kGroupNormGroups, x_.data(), hw, a_.data(), /*swish=*/true, &pool_);
  vq::Conv2d(weights_.conv_out, a_.data(), h, w, b_.data(), false, col_.data(), col_.size(), &pool_);
  if (config_.tanh_out) {
    float* out = b_.data();
    parallel::ParallelForRange(&pool_, static_cast<int64_t>(config_.out_ch * hw), [&](int64_t b, int64_t e2) {
      for (int64_t i = b; i < e2; ++i) out[i] = std::tanh(out[i]);
    });
  }
  return b_.data();
}

absl::Status VqganDecoder::DecodeToFloat(const CodeGrid& grid, std::vector<float>* chw) {
  if (absl::Status s = ValidateGrid(grid, 0); !s.ok()) return s;
  const int32_t up = config_.downsample();
  const size_t n = static_cast<size_t>(config_.out_ch) * grid.height * up * grid.width * up;
  std::lock_guard<std::mutex> lock(mu_);
  const float* out = Run(grid);
  chw->assign(out, out + n);
  return absl::OkStatus();
}

absl::Status VqganDecoder::DecodeLatentToFloat(const LatentGrid& latent, std::vector<float>* chw) {
  if (config_.quantized) {
    return absl::FailedPreconditionError("VQGAN decode: this decoder decodes codes (it has a codebook), not latents");
  }
  if (absl::Status s = ValidateSize(latent.height, latent.width, 0); !s.ok()) return s;
  const size_t cells = static_cast<size_t>(latent.height) * latent.width;
  if (latent.chw.size() != static_cast<size_t>(config_.z_channels) * cells) {
    return absl::InvalidArgumentError(absl::StrCat("VQGAN decode: a ", latent.height, " x ", latent.width,
                                                   " latent of ", config_.z_channels, " channels has ",
                                                   config_.z_channels * cells, " values, got ", latent.chw.size()));
  }
  const int32_t up = config_.downsample();
  const size_t n = static_cast<size_t>(config_.out_ch) * latent.height * up * latent.width * up;
  std::lock_guard<std::mutex> lock(mu_);
  std::copy(latent.chw.begin(), latent.chw.end(), a_.begin());
  const float* out = RunDecoder(latent.height, latent.width);
  chw->assign(out, out + n);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<engine::RgbImage>> VqganDecoder::Decode(const std::vector<CodeGrid>& grids) {
  for (size_t i = 0; i < grids.size(); ++i) {
    if (absl::Status s = ValidateGrid(grids[i], i); !s.ok()) return s;
  }
  const int32_t up = config_.downsample();
  std::vector<engine::RgbImage> images(grids.size());
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < grids.size(); ++i) {
    const float* out = Run(grids[i]);
    images[i].width = grids[i].width * up;
    images[i].height = grids[i].height * up;
    images[i].rgb.resize(3 * static_cast<size_t>(images[i].width) * images[i].height);
    // Chameleon clamps to [-1, 1] first; vq::ChwToRgb8's clip after scaling gives the same bytes.
    vq::ChwToRgb8(out, images[i].height, images[i].width, images[i].rgb.data(), &pool_);
  }
  return images;
}

}  // namespace argen::vqgan
