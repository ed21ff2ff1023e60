// The published Anole-7b shape (GAIR/Anole-7b-v0.1: Chameleon-7B, Meta's
// models/7b/params.json; transformers' ChameleonConfig defaults are the same
// model) as the family's own ModelSpec and decode grid, for benchmarks with
// random weights and no checkpoint: hidden 4096, 32 layers, 32 heads of 128
// (no GQA), intermediate 11008, vocab 65536 with the image codes at ids
// 4..8195, q/k-norm one [head_dim] vector per layer (Meta's layout), 1,024
// image tokens in 32 rows of 32 with no row breaks (512 px).
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "engine/families/lumina/lumina_config.h"
#include "engine/model/model_spec.h"
#include "kernels/sparse/policy_types.h"

namespace argen::anole {

// Anole's guidance row: [<s>, <racm3:break>].
inline constexpr int32_t kPublishedUncondTokens = 2;

struct PublishedAnole {
  lumina::LuminaConfig config;
  model::ModelSpec spec;
  sparse::GridGeometry grid;  // 32 x 32, no row breaks, the family's default N_r
};

absl::StatusOr<PublishedAnole> PublishedAnole7B();

}  // namespace argen::anole
