// Janus-Pro-1B and -7B generation shapes (the published config.json values)
// as the Janus family's ModelSpec, for random-weight benchmarks.
#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "engine/families/nextstep/nextstep_config.h"
#include "engine/model/model_spec.h"
#include "kernels/sparse/policy_types.h"

namespace argen::bench {

inline constexpr int kJanusImageTokens = 576;  // 384x384 at 1/16

absl::StatusOr<model::ModelSpec> JanusSpec(const std::string& name);  // "1b" or "7b"

// A benchmark model: Janus-Pro "1b" / "7b" (24 x 24 codes, guidance rows as
// long as the prompt) or Lumina-mGPT-7B "lumina-512" / "lumina-768" /
// "lumina-1024" (h rows of w codes and a new line each, L_dec = h(w + 1) - 1;
// the guidance row is the 3-token image header) or Anole-7b "anole-512" (32 x
// 32 codes, no row breaks; the guidance row is [<s>, <racm3:break>]) or
// Emu3-Gen "emu3" (720 x 720:
// 90 rows of 90 codes and a row end each; the guidance row is the negative
// prompt with the image header; "emu3-512": image_area 512^2, 64 rows of 64) or NextStep-1 "nextstep-14b" (512 px: 32 x
// 32 continuous tokens of 64 floats, raster order; a vector model whose
// flow-matching head the caller makes from `nextstep`, nextstep_shapes.h).
struct BenchModel {
  model::ModelSpec spec;
  sparse::GridGeometry grid;
  int uncond_len = 0;                                // 0: the prompt length
  std::optional<nextstep::NextStepConfig> nextstep;  // the published config of a NextStep model
};
absl::StatusOr<BenchModel> BenchModelFor(const std::string& name);

}  // namespace argen::bench
