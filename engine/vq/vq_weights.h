// The VQ-16 decoder's weights (gen_vision_model.*), loaded once as f32 from a
// checkpoint by their official names (janus/models/vq_model.py). Only the
// decode path is loaded: codebook, post_quant_conv and the decoder.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/vq/vq_config.h"

namespace argen::vq {

// nn.Conv2d: weight [cout, cin, k, k] (row-major = [cout, cin*k*k], the GEMM's A), bias [cout].
struct Conv2dWeights {
  int32_t cin = 0, cout = 0, kernel = 0;  // kernel 1 or 3 (stride 1, padding kernel/2)
  std::vector<float> weight;
  std::vector<float> bias;
};

// nn.GroupNorm(num_groups, channels, eps=1e-6, affine=True).
struct GroupNormWeights {
  int32_t channels = 0;
  std::vector<float> gamma, beta;
};

struct ResnetBlockWeights {
  GroupNormWeights norm1;
  Conv2dWeights conv1;
  GroupNormWeights norm2;
  Conv2dWeights conv2;
  std::optional<Conv2dWeights> nin_shortcut;  // 1x1, present iff cin != cout
};

struct AttnBlockWeights {
  GroupNormWeights norm;
  Conv2dWeights q, k, v, proj_out;  // 1x1
};

// decoder.conv_blocks.{i}: level ch_mult.size()-1-i, lowest resolution first.
struct UpBlockWeights {
  std::vector<ResnetBlockWeights> res;    // num_res_blocks + 1
  std::vector<AttnBlockWeights> attn;     // one per res block at the lowest resolution, else empty
  std::optional<Conv2dWeights> upsample;  // nearest x2 then this 3x3 conv; absent after the last block
};

struct VqDecoderWeights {
  int32_t codebook_size = 0, embed_dim = 0;
  std::vector<float> codebook;  // [codebook_size, embed_dim], rows l2-normalised when configured
  Conv2dWeights post_quant_conv;
  Conv2dWeights conv_in;
  ResnetBlockWeights mid_res0;
  AttnBlockWeights mid_attn;
  ResnetBlockWeights mid_res1;
  std::vector<UpBlockWeights> blocks;
  GroupNormWeights norm_out;
  Conv2dWeights conv_out;
};

// Checks the configuration (error names the gen_vision_config parameter).
absl::Status ValidateVqConfig(const vq::Vq16Config& config);

// Loads every decoder tensor under `prefix` with the shape the config implies;
// errors (from the checkpoint) name the tensor, the file and both shapes.
absl::StatusOr<VqDecoderWeights> LoadVqDecoderWeights(const checkpoint::Checkpoint& checkpoint,
                                                      const vq::Vq16Config& config,
                                                      const std::string& prefix = "gen_vision_model.");

}  // namespace argen::vq
