// params.json of a Chameleon / Anole checkpoint in Meta's layout
// (models/7b/params.json beside consolidated.pth, as GAIR/Anole-7b-v0.1 and
// facebook/chameleon ship it): the decoder's fields, optionally nested under
// "model" with model_parallel_size at the top, read as transformers'
// convert_chameleon_weights_to_hf.py reads them and returned as the same
// LuminaConfig the HF layout's config.json gives (engine/families/lumina/
// lumina_config.h), so both layouts share one tensor map (LuminaSpec):
//   dim -> hidden_size, n_layers, n_heads, n_kv_heads (absent or null: n_heads),
//   norm_eps -> rms_norm_eps, rope_theta (default 10000), swin_norm,
//   intermediate_size = multiple_of * ceil(int(ffn_dim_multiplier * int(8 dim / 3)) / multiple_of)
//   (multiple_of default 256, ffn_dim_multiplier default 1), vocab_size (default
//   65,536: the converter's constant), max_position_embeddings 4,096 (16,384
//   when rope_theta > 10000, as the converter sets it).
// Keys argen does not use are ignored (the file carries training settings).
// The vocabulary_map is left empty: it comes from text_tokenizer.json.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "engine/families/lumina/lumina_config.h"

namespace argen::anole {

// The vocabulary size transformers' converter assumes (params.json may omit it).
inline constexpr int32_t kMetaDefaultVocabSize = 65536;

// Errors (InvalidArgument) name `file` and the field: malformed JSON, a
// required field missing or not a positive integer, a model_parallel_size
// other than 1, qk_normalization false (Chameleon always normalises q and k).
absl::StatusOr<lumina::LuminaConfig> ParseMetaParams(const std::string& json_text, const std::string& file);
absl::StatusOr<lumina::LuminaConfig> LoadMetaParams(const std::string& path);

}  // namespace argen::anole
