// The published Lumina-mGPT-7B shapes (Alpha-VLLM/Lumina-mGPT-7B-{512,768,1024}
// config.json: hidden 4096, intermediate 11008, 32 layers, 32 heads, vocab
// 65536, image tokens 4..8195, new line <reserved08799> = 8803), for
// benchmarks with random weights and no checkpoint.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "engine/families/lumina/lumina_config.h"
#include "engine/families/lumina/lumina_schedule.h"
#include "engine/model/model_spec.h"

namespace argen::lumina {

inline constexpr int32_t kPublishedFirstImageId = 4;
inline constexpr int32_t kPublishedImageTokens = 8192;
inline constexpr int32_t kPublishedNewLineId = 8803;

struct PublishedLumina {
  LuminaConfig config;
  model::ModelSpec spec;
  LuminaSchedule schedule;  // the square target
};

// target: 512, 768 or 1024 (the square image of that checkpoint).
absl::StatusOr<PublishedLumina> PublishedLumina7B(int32_t target);

}  // namespace argen::lumina
