// The published Emu3-Gen shapes (BAAI/Emu3-Gen config.json: hidden 4096,
// intermediate 14336, 32 layers, 32 heads / 8 KV heads, vocab 184,622, rope
// theta 1e6; visual tokens 151,854.. (32,768 codes), row end <|extra_200|> =
// 151,846; 720 x 720 is 90 rows of 90 codes), in BAAI's layout, for
// benchmarks with random weights and no checkpoint.
#pragma once

#include <cstdint>

#include "absl/status/statusor.h"
#include "engine/families/emu3/emu3_config.h"
#include "engine/families/emu3/emu3_schedule.h"
#include "engine/model/model_spec.h"

namespace argen::emu3 {

inline constexpr int32_t kPublishedFirstVisualId = 151854;
inline constexpr int32_t kPublishedCodes = 32768;
inline constexpr int32_t kPublishedRowEndId = 151846;
// BOS, the default negative prompt (44 tokens with the published 151,643 ranks:
// tools/goldens/check_emu3_real_tokenizer.py) and the header <|image start|> 9 0 * 9 0
// <|image token|>: the guidance row's length at 720 x 720.
inline constexpr int32_t kPublishedUncondTokens = 1 + 44 + 7;

struct PublishedEmu3 {
  Emu3Config config;
  model::ModelSpec spec;
  Emu3Schedule schedule;
};

// width x height: one of Emu3's sizes at image_area px^2 (Emu3Sizes; config.json's
// image_area, 720^2 as published); 0 x 0: the square one (720 x 720 as published).
absl::StatusOr<PublishedEmu3> PublishedEmu3Gen(int32_t width = 0, int32_t height = 0,
                                               int32_t image_area = kDefaultImageArea);

}  // namespace argen::emu3
