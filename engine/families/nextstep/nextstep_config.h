// config.json of a NextStep-1 checkpoint (stepfun-ai/NextStep-1-Large and its
// -Pretrain / -Edit siblings; remote code nextstep/models/
// configuration_nextstep.py, a LlamaConfig with NextStep's fields), and the
// VAE's own config.json (NextStep-1-f8ch16-Tokenizer, modeling_flux_vae.py's
// AutoEncoderParams) in <model_dir>/vae unless vae_name_or_path names another
// directory.
//
// The decoder is Qwen2.5-style Llama: RMSNorm, plain RoPE, SwiGLU, GQA, q/k/v
// projections with biases (attention_bias), o_proj without
// (o_attention_bias); anything else is refused naming the field. The image
// side: a token is latent_channels * latent_patch_size^2 floats, sampled by
// the flow-matching head (fm_head_dim wide, fm_head_layers blocks).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace argen::nextstep {

struct NextStepConfig {
  int32_t hidden_size = 0;
  int32_t intermediate_size = 0;
  int32_t num_hidden_layers = 0;
  int32_t num_attention_heads = 0;
  int32_t num_key_value_heads = 0;  // default: num_attention_heads
  int32_t head_dim = 0;             // default: hidden_size / num_attention_heads
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  int32_t vocab_size = 0;
  int32_t max_position_embeddings = 0;
  // The image tokens' ids (configuration_nextstep.py: boi, eoi, image_placeholder_id).
  int32_t boi = -1, eoi = -1, image_placeholder_id = -1;
  int32_t latent_channels = 16;
  int32_t latent_patch_size = 2;
  int32_t latent_size = 32;  // the image side in tokens (configuration_nextstep.py's default: 512 px)
  int32_t fm_head_dim = 1536;
  int32_t fm_head_layers = 12;
  std::string vae_name_or_path;  // "" when absent

  int32_t token_dim() const { return latent_channels * latent_patch_size * latent_patch_size; }
};

// modeling_flux_vae.py's AutoEncoderParams (its defaults where the file is silent).
struct NextStepVaeConfig {
  int32_t ch = 128;
  int32_t out_ch = 3;
  std::vector<int32_t> ch_mult = {1, 2, 4, 4};
  int32_t num_res_blocks = 2;
  int32_t z_channels = 16;
  double scaling_factor = 0.3611;
  double shift_factor = 0.1159;

  int32_t downsample() const { return 1 << (static_cast<int32_t>(ch_mult.size()) - 1); }
};

// Parses and checks config.json text; errors name `file` and the field.
absl::StatusOr<NextStepConfig> ParseNextStepConfig(const std::string& json_text, const std::string& file);
absl::StatusOr<NextStepConfig> LoadNextStepConfig(const std::string& model_dir);

absl::StatusOr<NextStepVaeConfig> ParseNextStepVaeConfig(const std::string& json_text, const std::string& file);
absl::StatusOr<NextStepVaeConfig> LoadNextStepVaeConfig(const std::string& vae_dir);

// The VAE directory: vae_name_or_path when it names a directory (relative to
// model_dir), else <model_dir>/vae.
std::string NextStepVaeDir(const std::string& model_dir, const NextStepConfig& config);

}  // namespace argen::nextstep
