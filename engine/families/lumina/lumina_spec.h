// The Lumina-mGPT (Chameleon) tensor map: the ModelSpec of a config, by the
// HF names (model.embed_tokens, model.layers.{i}.*, model.norm, lm_head;
// docs/lumina-mgpt.md "Tensors"). QK-norm always, swin_norm by the config,
// RMSNorm; the input stage is the embedding table itself (sampled logit v is
// token first_image_id + v), the output stage lm_head's image-token rows only.
// q_norm / k_norm are stored [heads, head_dim] (HF) or [model_parallel_size,
// head_dim] (Lumina-mGPT, expanded by repeat_interleave): the stored row
// count says which. model.vqmodel.* is never read.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/families/lumina/lumina_config.h"
#include "engine/model/model_spec.h"

namespace argen::lumina {

struct QkNormRows {
  int32_t q = 0, k = 0;  // stored rows of layer 0's q_norm / k_norm weight (0: the HF layout)
};

// Reads the stored q/k-norm row counts (metadata only). Errors name the
// tensor: missing, not 2-D [rows, head_dim], or rows that neither equal the
// heads nor divide them (rows == model_parallel_size).
absl::StatusOr<QkNormRows> ReadQkNormRows(const checkpoint::Checkpoint& checkpoint, const LuminaConfig& config);

// image tokens: ids [first_image_id, first_image_id + image_count).
absl::StatusOr<model::ModelSpec> LuminaSpec(const LuminaConfig& config, int32_t first_image_id, int32_t image_count,
                                            QkNormRows qk_rows = {});

}  // namespace argen::lumina
