#include "engine/vq/vq_decoder.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/vq/conv2d.h"
#include "engine/vq/group_norm.h"
#include "engine/vq/pixels.h"
#include "engine/vq/spatial_attention.h"

namespace argen::vq {
namespace {

// im2col band budget: 8 Mi floats (32 MiB) keeps the columns of a band in a
// size the GEMM streams well while bounding memory at any resolution.
constexpr size_t kColBudgetFloats = size_t{8} << 20;

// Largest activation (floats) and im2col band over the whole decode.
struct ScratchPlan {
  size_t act = 0;
  size_t col = 0;
  void Conv(const Conv2dWeights& c, int32_t h, int32_t w) {
    const size_t hw = static_cast<size_t>(h) * w;
    act = std::max({act, c.cin * hw, c.cout * hw});
    col = std::max(col, Conv2dScratchFloats(c, h, w, kColBudgetFloats));
  }
  void Resnet(const ResnetBlockWeights& r, int32_t h, int32_t w) {
    Conv(r.conv1, h, w);
    Conv(r.conv2, h, w);
    if (r.nin_shortcut) Conv(*r.nin_shortcut, h, w);
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<VqDecoder>> VqDecoder::Create(const checkpoint::Checkpoint& checkpoint,
                                                             const vq::Vq16Config& config, int32_t threads) {
  auto weights = LoadVqDecoderWeights(checkpoint, config);
  if (!weights.ok()) return weights.status();
  return Create(std::move(*weights), config, threads);
}

absl::StatusOr<std::unique_ptr<VqDecoder>> VqDecoder::Create(VqDecoderWeights weights, const vq::Vq16Config& config,
                                                             int32_t threads) {
  if (threads < 0) return absl::InvalidArgumentError(absl::StrCat("VqDecoder: threads must be >= 0, got ", threads));
  if (absl::Status s = ValidateVqConfig(config); !s.ok()) return s;
  if (weights.blocks.size() != config.ch_mult.size() || weights.codebook_size != config.codebook_size ||
      weights.embed_dim != config.codebook_embed_dim ||
      weights.codebook.size() != static_cast<size_t>(config.codebook_size) * config.codebook_embed_dim) {
    return absl::InvalidArgumentError(
        "VqDecoder: weights do not match gen_vision_config (codebook or ch_mult levels differ)");
  }
  if (threads == 0) threads = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  return std::unique_ptr<VqDecoder>(new VqDecoder(std::move(weights), config, threads));
}

VqDecoder::VqDecoder(VqDecoderWeights weights, const vq::Vq16Config& config, int32_t threads)
    : weights_(std::move(weights)), config_(config), pool_(threads) {
  const int32_t g = config_.token_grid();
  ScratchPlan plan;
  plan.Conv(weights_.post_quant_conv, g, g);
  plan.Conv(weights_.conv_in, g, g);
  plan.Resnet(weights_.mid_res0, g, g);
  plan.Resnet(weights_.mid_res1, g, g);
  int32_t side = g;
  for (const UpBlockWeights& block : weights_.blocks) {
    for (const ResnetBlockWeights& r : block.res) plan.Resnet(r, side, side);
    if (block.upsample) {
      side *= 2;
      plan.Conv(*block.upsample, side, side);
    }
  }
  plan.Conv(weights_.conv_out, side, side);
  x_.resize(plan.act);
  a_.resize(plan.act);
  b_.resize(plan.act);
  col_.resize(plan.col);
  const size_t attn = static_cast<size_t>(weights_.mid_attn.q.cout) * g * g;
  q_.resize(attn);
  k_.resize(attn);
  v_.resize(attn);
  scores_.resize(static_cast<size_t>(g) * g * g * g);
}

size_t VqDecoder::scratch_bytes() const {
  return sizeof(float) *
         (x_.size() + a_.size() + b_.size() + col_.size() + q_.size() + k_.size() + v_.size() + scores_.size());
}

absl::Status VqDecoder::ValidateGrid(std::span<const int32_t> tokens, size_t grid_index) const {
  const int32_t g = config_.token_grid();
  if (tokens.size() != static_cast<size_t>(g) * g) {
    return absl::InvalidArgumentError(absl::StrCat("VQ decode: token grid ", grid_index, " has ", tokens.size(),
                                                   " tokens, expected ", g * g, " (", g, " x ", g, ")"));
  }
  for (size_t p = 0; p < tokens.size(); ++p) {
    if (tokens[p] < 0 || tokens[p] >= config_.codebook_size) {
      return absl::InvalidArgumentError(absl::StrCat("VQ decode: token grid ", grid_index, ", position ", p, ": id ",
                                                     tokens[p], " outside the codebook [0, ", config_.codebook_size,
                                                     ")"));
    }
  }
  return absl::OkStatus();
}

void VqDecoder::ResnetBlock(const ResnetBlockWeights& w, int32_t h, int32_t wd) {
  const size_t hw = static_cast<size_t>(h) * wd;
  const int32_t groups = config_.num_groups;
  GroupNorm(w.norm1, groups, x_.data(), hw, a_.data(), /*swish=*/true, &pool_);
  Conv2d(w.conv1, a_.data(), h, wd, b_.data(), false, col_.data(), col_.size(), &pool_);
  // (dropout sits here in training; identity at inference)
  GroupNorm(w.norm2, groups, b_.data(), hw, b_.data(), /*swish=*/true, &pool_);
  Conv2d(w.conv2, b_.data(), h, wd, a_.data(), false, col_.data(), col_.size(), &pool_);
  if (w.nin_shortcut) {
    Conv2d(*w.nin_shortcut, x_.data(), h, wd, a_.data(), /*accumulate=*/true, col_.data(), col_.size(), &pool_);
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

void VqDecoder::AttnBlock(const AttnBlockWeights& w, int32_t h, int32_t wd) {
  const size_t hw = static_cast<size_t>(h) * wd;
  GroupNorm(w.norm, config_.num_groups, x_.data(), hw, a_.data(), /*swish=*/false, &pool_);
  Conv2d(w.q, a_.data(), h, wd, q_.data(), false, nullptr, 0, &pool_);
  Conv2d(w.k, a_.data(), h, wd, k_.data(), false, nullptr, 0, &pool_);
  Conv2d(w.v, a_.data(), h, wd, v_.data(), false, nullptr, 0, &pool_);
  SpatialAttention(q_.data(), k_.data(), v_.data(), w.q.cout, static_cast<int32_t>(hw), scores_.data(), a_.data(),
                   &pool_);
  Conv2d(w.proj_out, a_.data(), h, wd, x_.data(), /*accumulate=*/true, nullptr, 0, &pool_);
}

const float* VqDecoder::Run(std::span<const int32_t> tokens) {
  const int32_t g = config_.token_grid();
  const size_t cells = static_cast<size_t>(g) * g;
  const int32_t e = weights_.embed_dim;
  // Codebook rows, transposed to CHW: b_[c, p] = codebook[tokens[p], c].
  for (size_t p = 0; p < cells; ++p) {
    const float* row = weights_.codebook.data() + static_cast<size_t>(tokens[p]) * e;
    for (int32_t c = 0; c < e; ++c) b_[c * cells + p] = row[c];
  }
  Conv2d(weights_.post_quant_conv, b_.data(), g, g, a_.data(), false, nullptr, 0, &pool_);
  Conv2d(weights_.conv_in, a_.data(), g, g, x_.data(), false, col_.data(), col_.size(), &pool_);
  ResnetBlock(weights_.mid_res0, g, g);
  AttnBlock(weights_.mid_attn, g, g);
  ResnetBlock(weights_.mid_res1, g, g);
  int32_t side = g;
  for (const UpBlockWeights& block : weights_.blocks) {
    for (size_t j = 0; j < block.res.size(); ++j) {
      ResnetBlock(block.res[j], side, side);
      if (!block.attn.empty()) AttnBlock(block.attn[j], side, side);
    }
    if (block.upsample) {
      UpsampleNearest2x(x_.data(), block.upsample->cin, side, side, a_.data(), &pool_);
      side *= 2;
      Conv2d(*block.upsample, a_.data(), side, side, x_.data(), false, col_.data(), col_.size(), &pool_);
    }
  }
  GroupNorm(weights_.norm_out, config_.num_groups, x_.data(), static_cast<size_t>(side) * side, a_.data(),
            /*swish=*/true, &pool_);
  Conv2d(weights_.conv_out, a_.data(), side, side, b_.data(), false, col_.data(), col_.size(), &pool_);
  return b_.data();
}

absl::Status VqDecoder::DecodeToFloat(std::span<const int32_t> tokens, std::vector<float>* chw) {
  if (absl::Status s = ValidateGrid(tokens, 0); !s.ok()) return s;
  const size_t n = 3 * static_cast<size_t>(image_size()) * image_size();
  std::lock_guard<std::mutex> lock(mu_);
  const float* out = Run(tokens);
  chw->assign(out, out + n);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<engine::RgbImage>> VqDecoder::Decode(const std::vector<std::vector<int32_t>>& token_grids) {
  for (size_t i = 0; i < token_grids.size(); ++i) {
    if (absl::Status s = ValidateGrid(token_grids[i], i); !s.ok()) return s;
  }
  const int32_t side = image_size();
  std::vector<engine::RgbImage> images(token_grids.size());
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < token_grids.size(); ++i) {
    const float* out = Run(token_grids[i]);
    images[i].width = side;
    images[i].height = side;
    images[i].rgb.resize(3 * static_cast<size_t>(side) * side);
    ChwToRgb8(out, side, side, images[i].rgb.data(), &pool_);
  }
  return images;
}

}  // namespace argen::vq
