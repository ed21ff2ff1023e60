// The decode path's weights of Emu3's vision tokenizer, reduced to one frame.
//
// The reference decodes a code grid as a 4-frame video and keeps frame 0
// (transformers' Emu3VQVAE.decode, `video[:, 0]`). Every temporal layer is
// causal (2 frames of zero padding in front, nearest temporal upsampling), so
// frame 0 depends on frame 0 alone: a causal Conv3d with kernel (3, k, k) is
// the 2-D conv of its last temporal tap, and an eval-mode BatchNorm3d a
// per-channel affine (running statistics). Loading takes those taps; the
// decoder then runs only 2-D layers.
//
// Two tensor namings (docs/checkpoint-format.md, "Emu3"): BAAI's
// (Emu3-VisionTokenizer's model.safetensors: decoder.mid.*, decoder.up.*,
// attention as 1x1 convs q/k/v/proj_out with its norm inside) and
// transformers' (Emu3-Gen-hf: <prefix>decoder.middle_block.*,
// decoder.up_block.up.*, attention as Linear q_proj/k_proj/v_proj/out_proj,
// its norm beside it as attn_norm / attn_norms).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/emu3vq/emu3vq_config.h"
#include "engine/vq/vq_weights.h"

namespace argen::emu3vq {

// Per-channel y = x * scale + shift (an eval-mode BatchNorm3d).
struct ChannelAffine {
  std::vector<float> scale, shift;
};

struct TemporalResnetWeights {
  ChannelAffine norm1;
  vq::Conv2dWeights conv1;  // 3x3: the causal Conv3d's last temporal tap
  ChannelAffine norm2;
  vq::Conv2dWeights conv2;
};

// GroupNorm of x, then x * conv_y(zq) + conv_b(zq), zq nearest-resized to x.
struct SpatialNormWeights {
  vq::GroupNormWeights norm;
  vq::Conv2dWeights conv_y, conv_b;  // 1x1, embed_dim -> channels
};

struct SpatialResnetWeights {
  SpatialNormWeights norm1;
  vq::Conv2dWeights conv1;
  SpatialNormWeights norm2;
  vq::Conv2dWeights conv2;
  std::optional<vq::Conv2dWeights> nin_shortcut;  // 1x1, iff channels change
};

struct SpatialAttnWeights {
  SpatialNormWeights norm;
  vq::Conv2dWeights q, k, v, proj_out;  // 1x1 (a Linear over channels is the same map)
};

struct UpLevelWeights {
  std::vector<SpatialResnetWeights> block;    // num_res_blocks + 1
  std::vector<SpatialAttnWeights> attn;       // one per block where the level has attention, else empty
  std::optional<vq::Conv2dWeights> upsample;  // nearest x2 then 3x3; levels above 0
};

struct Emu3VqWeights {
  std::vector<float> codebook;        // [codebook_size, embed_dim]
  vq::Conv2dWeights post_quant_conv;  // 1x1: the (3, 1, 1) causal conv's last tap
  std::vector<TemporalResnetWeights> time_res_stack;
  std::vector<vq::Conv2dWeights> time_conv;  // 3x3 each, swish after
  vq::Conv2dWeights conv_in;
  SpatialResnetWeights mid_block_1;
  SpatialAttnWeights mid_attn_1;
  SpatialResnetWeights mid_block_2;
  std::vector<UpLevelWeights> up;  // indexed by level (0: full resolution), run from the last
  SpatialNormWeights norm_out;
  vq::Conv2dWeights conv_out;
};

enum class Emu3VqNaming { kBaai, kTransformers };

// name, shape -> f32 values; errors name the tensor (and its file).
using TensorSource =
    std::function<absl::StatusOr<std::vector<float>>(const std::string& name, const std::vector<int64_t>& shape)>;
TensorSource CheckpointTensorSource(const checkpoint::Checkpoint& checkpoint);

// prefix: "" for BAAI's own file; "vqmodel." or "model.vqmodel." in a
// transformers checkpoint. Errors name the tensor: missing, or a shape the
// config does not give.
absl::StatusOr<Emu3VqWeights> LoadEmu3VqWeights(const TensorSource& source, const Emu3VqConfig& config,
                                                Emu3VqNaming naming, const std::string& prefix);

// Every tensor the decoder reads, with its stored shape (validation, tests).
std::vector<std::pair<std::string, std::vector<int64_t>>> Emu3VqTensorNames(const Emu3VqConfig& config,
                                                                            Emu3VqNaming naming,
                                                                            const std::string& prefix);

}  // namespace argen::emu3vq
