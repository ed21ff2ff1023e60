// Emu3's vision decoder weights re-laid for the bf16 path (bf16_emu3vq_network.h):
// host-only (no CUDA; built in every build, its test runs in CI), so the
// padding, the folds and the refusals are checked without a GPU.
//
// - 3x3 filters KRSC [cout][3][3][cin] and 1x1 filters [cout][cin], bf16, in
//   the half blob; biases, affines, GroupNorm's gamma / beta and conv_out
//   ([9 taps][3][cin]) as floats in the float blob; every tensor 256-byte
//   aligned; offsets in elements.
// - The latent and condition channels (z_channels = embed_dim) padded with
//   zeros to zp, a multiple of 8: zero weights, biases and affines keep the
//   pad channels zero through the temporal stack.
// - Two codebook tables [codebook][zp]: the codebook itself (the SpatialNorm
//   condition) and post_quant_conv folded into it (W codebook[id] + b, in
//   double), so one lookup gives the latents.
// - The temporal ResNet's conv1 bias folded into norm2's shift; a spatial
//   ResNet's conv2 bias (+ nin_shortcut's) as one output bias; SpatialNorm's
//   conv_y | conv_b fused into one [2c][zp] filter and a [2c] bias; attention
//   q | k | v fused into [3c][c].
//
// A layout the bf16 kernels cannot take (a channel count not a multiple of 8,
// GroupNorm wider than kVqNhwcMaxGroupNormChannels, conv_out wider than
// kVqNhwcMaxConvOutChannels, a conv of an unexpected kernel) is
// FailedPrecondition naming the layer: the decoder falls back to fp32.
#pragma once

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/emu3vq/emu3vq_config.h"
#include "engine/emu3vq/emu3vq_weights.h"

namespace argen::vq {

// Device weights as blob offsets: bf16 filters (3x3 KRSC [cout][3][3][cin],
// 1x1 [cout][cin]) in the half blob, biases and affines in the float blob;
// channel counts as stored (the latent's padded to 8).
struct Bf16Emu3Conv {
  int32_t cin = 0, cout = 0, kernel = 0;
  int64_t w = -1, b = -1;
};
struct Bf16Emu3Affine {
  int64_t scale = -1, shift = -1;
};
struct Bf16Emu3SpatialNorm {
  int32_t channels = 0;
  int64_t gamma = -1, beta = -1;
  int64_t cond_w = -1;  // conv_y | conv_b fused: [2c][zp]
  int64_t cond_b = -1;  // [2c]
};
struct Bf16Emu3Res {
  Bf16Emu3SpatialNorm norm1, norm2;
  Bf16Emu3Conv conv1, conv2, nin;
  bool has_nin = false;
  int64_t out_bias = -1;  // conv2's bias (+ nin's with a shortcut)
};
struct Bf16Emu3Attn {
  Bf16Emu3SpatialNorm norm;
  int32_t channels = 0;
  int64_t wqkv = -1, bqkv = -1, wproj = -1, bproj = -1;
};
struct Bf16Emu3TemporalRes {
  Bf16Emu3Affine norm1;
  Bf16Emu3Conv conv1;
  Bf16Emu3Affine norm2;  // conv1's bias folded into the shift
  Bf16Emu3Conv conv2;
};
struct Bf16Emu3Level {
  std::vector<Bf16Emu3Res> block;
  std::vector<Bf16Emu3Attn> attn;
  bool has_upsample = false;
  Bf16Emu3Conv upsample;
};

struct Bf16Emu3VqLayout {
  int32_t zp = 8;                   // latent / condition channels as stored
  std::vector<uint16_t> half_blob;  // bf16 bits
  std::vector<float> float_blob;
  int64_t cond_table = -1, latent_table = -1;  // [codebook][zp]: the codebook; post_quant_conv of it
  std::vector<Bf16Emu3TemporalRes> time_res;
  std::vector<Bf16Emu3Conv> time_conv;
  Bf16Emu3Conv conv_in;
  Bf16Emu3Res mid_block_1, mid_block_2;
  Bf16Emu3Attn mid_attn;
  std::vector<Bf16Emu3Level> up;  // by level
  Bf16Emu3SpatialNorm norm_out;
  int32_t conv_out_cin = 0;
  int64_t conv_out_w = -1, conv_out_b = -1;  // [9][3][cin] floats, [3]
};

absl::StatusOr<Bf16Emu3VqLayout> LayOutBf16Emu3Vq(const emu3vq::Emu3VqWeights& weights,
                                                  const emu3vq::Emu3VqConfig& config);

}  // namespace argen::vq
