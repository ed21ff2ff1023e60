// Anole (GAIR-NLP/anole: Chameleon-7B with its image generation restored),
// docs/anole.md. Its own family beside Lumina-mGPT's, sharing the Chameleon
// pieces (engine/families/lumina: the config, the image-token map, the tensor
// map, the VQGAN binding) because what differs is the generation recipe and
// the files, not the network:
//   * the decode: exactly 1,024 image tokens, a 32 x 32 grid with no row
//     breaks, no size header and nothing forced (Lumina-mGPT writes a header
//     and a new line per row, at many sizes); the image is 32 codes a side
//     times the VQGAN's downsampling (512 px for the published 16x VQGAN);
//   * the prompt and guidance (anole_prompt.h): <s> caption <reserved08706>
//     <racm3:break>, guided against [<s>, <racm3:break>] at cfg 3.0;
//   * sampling as Anole's Options.Image: temperature 0.7, top-p 0.9, no top-k;
//   * two layouts: the community -hf conversion (config.json model_type
//     "chameleon", model.safetensors, tokenizer.json; recognised as Anole
//     when the directory's name contains "anole", since its config.json is
//     indistinguishable from Lumina-mGPT's) and Meta's own (models/7b/
//     params.json + consolidated.pth, tokenizer/text_tokenizer.json; read
//     through meta_checkpoint.h). The VQGAN is Meta's vqgan.yaml + vqgan.ckpt
//     in both (the -hf conversion drops the decoder): the family option
//     vqgan_dir, default <model_dir>/tokenizer (Meta's layout: the tokenizer
//     folder beside models/, which also holds text_tokenizer.json).
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "engine/families/family.h"
#include "kernels/sparse/policy_types.h"

namespace argen::anole {

inline constexpr int32_t kGridSide = 32;  // 1,024 image tokens (chameleon.py: gen_count == 1024)
inline constexpr float kDefaultCfgWeight = 3.0f;
inline constexpr float kDefaultTemperature = 0.7f;
inline constexpr float kDefaultTopP = 0.9f;

// Anole's decode grid: 32 rows of 32 codes, no row breaks, L_dec 1,024, with
// the family's default diagonal window N_r (2 2/3 rows, docs/policies.md).
sparse::GridGeometry AnoleGrid();

families::Family AnoleFamily();

absl::StatusOr<families::FamilyModel> LoadAnole(const std::string& model_dir, const families::FamilyOptions& options);

// Meta's layout: <model_dir>/models/7b/params.json, or params.json in model_dir itself.
bool IsMetaLayout(const std::string& model_dir);

}  // namespace argen::anole
