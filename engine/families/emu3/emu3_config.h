// config.json of an Emu3-Gen checkpoint, in either published layout
// (docs/checkpoint-format.md, "Emu3"):
//   * BAAI's own (BAAI/Emu3-Gen, remote code; model_type "Emu3"): the
//     decoder's fields at the top level with the special token ids and
//     image_area; the vision tokenizer (BAAI/Emu3-VisionTokenizer) is a
//     directory of its own, <model_dir>/vision_tokenizer unless the family
//     option vision_tokenizer_dir names another;
//   * transformers' (BAAI/Emu3-Gen-hf; model_type "emu3"): text_config,
//     vq_config and vocabulary_map; the vision tokenizer's weights sit in the
//     same checkpoint (vqmodel.*). image_area: config.json's key when
//     present (argen's extension), else Emu3's 720 x 720.
// The decoder is plain Llama (RMSNorm, RoPE without scaling, SwiGLU, GQA, no
// biases, untied lm_head); anything else is refused naming the field.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "engine/emu3vq/emu3vq_config.h"

namespace argen::emu3 {

enum class Emu3Layout { kBaai, kTransformers };

inline constexpr int32_t kDefaultImageArea = 720 * 720;

struct Emu3Config {
  Emu3Layout layout = Emu3Layout::kBaai;
  int32_t hidden_size = 0;
  int32_t intermediate_size = 0;
  int32_t num_hidden_layers = 0;
  int32_t num_attention_heads = 0;
  int32_t num_key_value_heads = 0;  // default: num_attention_heads
  int32_t head_dim = 0;             // hidden_size / num_attention_heads
  double rms_norm_eps = 1e-5;
  double rope_theta = 1e6;
  int32_t vocab_size = 0;
  int32_t max_position_embeddings = 9216;
  int32_t image_area = kDefaultImageArea;  // pixels of the reference's generated image at any ratio
  // Special ids as config.json states them (-1: not stated); checked against the tokenizer.
  int32_t bos_token_id = -1, eos_token_id = -1, pad_token_id = -1;
  int32_t img_token_id = -1, boi_token_id = -1, eoi_token_id = -1, eol_token_id = -1, eof_token_id = -1;
  // transformers' layout only (BAAI's is read from the vision tokenizer's own config.json).
  emu3vq::Emu3VqConfig vq;
};

// Parses and checks config.json text; errors name `file` and the field.
absl::StatusOr<Emu3Config> ParseEmu3Config(const std::string& json_text, const std::string& file);
// Reads <dir>/config.json.
absl::StatusOr<Emu3Config> LoadEmu3Config(const std::string& dir);
// Reads <vision_dir>/config.json (model_type Emu3VisionVQ).
absl::StatusOr<emu3vq::Emu3VqConfig> LoadBaaiVisionConfig(const std::string& vision_dir);

}  // namespace argen::emu3
