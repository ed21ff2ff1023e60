// The Chameleon VQGAN decoder's weights, loaded once as f32 by their names in
// vqgan.ckpt's state_dict (Meta's chameleon/inference/vqgan.py): the codebook
// quantize.embedding.weight, post_quant_conv and decoder.*. Only the decode
// path is read; the encoder, quant_conv and a training loss's tensors
// (loss.*) may be present and are ignored.
//
// Weights come from an abstract tensor source (name, expected shape -> f32),
// so a safetensors directory (engine/checkpoint) and the PyTorch .ckpt reader
// feed the same loader.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/vq/vq_weights.h"
#include "engine/vqgan/vqgan_config.h"

namespace argen::vqgan {

// name, expected shape -> the tensor as f32 (row-major); errors name the
// tensor, its file, and both shapes on a mismatch.
using TensorSource =
    std::function<absl::StatusOr<std::vector<float>>(const std::string& name, const std::vector<int64_t>& shape)>;

// A source over a checkpoint (must outlive the source).
TensorSource CheckpointTensorSource(const checkpoint::Checkpoint& checkpoint);

// decoder.up.{level}: level 0 is the full-resolution one; the decoder runs
// levels from the last (lowest resolution) to 0.
struct UpLevelWeights {
  std::vector<vq::ResnetBlockWeights> block;  // num_res_blocks + 1
  std::vector<vq::AttnBlockWeights> attn;     // one per block where the level has attention, else empty
  std::optional<vq::Conv2dWeights>
      upsample;              // nearest x2 then this 3x3 conv; absent at level 0 (or without resamp_with_conv)
  bool upsample_2x = false;  // level != 0: the activation doubles after the blocks
};

struct VqganDecoderWeights {
  int32_t n_embed = 0, embed_dim = 0;
  std::vector<float> codebook;        // [n_embed, embed_dim]; empty when not quantized
  vq::Conv2dWeights post_quant_conv;  // unset when not quantized
  vq::Conv2dWeights conv_in;
  vq::ResnetBlockWeights mid_block_1;
  std::optional<vq::AttnBlockWeights> mid_attn_1;  // absent with attn_type "none"
  vq::ResnetBlockWeights mid_block_2;
  std::vector<UpLevelWeights> up;  // indexed by level
  vq::GroupNormWeights norm_out;
  vq::Conv2dWeights conv_out;
};

// Every decode-path tensor under `prefix` with the shape the config implies.
absl::StatusOr<VqganDecoderWeights> LoadVqganDecoderWeights(const TensorSource& source, const VqganConfig& config,
                                                            const std::string& prefix = "");

// The decode-path tensor names with their shapes (for validating a checkpoint
// up front, e.g. together with the language model's tensors).
std::vector<std::pair<std::string, std::vector<int64_t>>> VqganDecoderTensors(const VqganConfig& config,
                                                                              const std::string& prefix = "");

}  // namespace argen::vqgan
