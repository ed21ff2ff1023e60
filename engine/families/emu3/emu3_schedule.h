// Emu3's image sizes and the decode schedule of one size
// (docs/checkpoint-format.md, "Emu3"; BAAI's Emu3PrefixConstrainedLogitsHelper).
//
// Sizes: the reference turns a ratio W:H into a code grid of
// round(sqrt(A * W/H)) x round(sqrt(A * H/W)) codes, A = image_area / f^2
// (f pixels a code: 8; A = 8100 for 720^2), so it makes exactly the grids
// w x h with (w - 1/2)(h - 1/2) <= A <= (w + 1/2)(h + 1/2). argen serves
// those with an aspect ratio of at most 4 (a finite list): W = f w, H = f h.
// 720 x 720 (90 x 90 codes) is the default.
//
// After the prompt (which ends with <|image token|>) the model writes h rows
// of w visual tokens, each row closed by the row end <|extra_200|>, then
// <|extra_201|> (end of frame), <|image end|>, the EOS: h(w + 1) + 3 tokens,
// every non-visual one forced by the reference. argen's decode tokens are the
// rows without the last row end: L_dec = h(w + 1) - 1, the row ends at t =
// (r + 1)(w + 1) - 1 forced (fed back, so they write KV like any token); the
// tail needs no forward pass. The grid for the policies: {w, 1, L_dec}.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/sparse/policy_types.h"

namespace argen::emu3 {

inline constexpr int32_t kMaxAspectRatio = 4;

// Every (W, H) in pixels the rule above gives, from wide to tall.
std::vector<std::pair<int32_t, int32_t>> Emu3Sizes(int32_t image_area, int32_t pixels_per_code);
// The reference's size for ratio 1:1 (its default): f * round(sqrt(A)) on a side.
std::pair<int32_t, int32_t> Emu3DefaultSize(int32_t image_area, int32_t pixels_per_code);
// The rule in words, for messages.
std::string Emu3SizeRule(int32_t image_area, int32_t pixels_per_code);

struct Emu3Schedule {
  int32_t width = 0, height = 0;   // pixels
  int32_t grid_w = 0, grid_h = 0;  // codes per row, rows
  int32_t l_dec = 0;               // h(w + 1) - 1
  std::vector<int32_t> forced;     // [l_dec]: the row end at row ends, -1 where sampled
  sparse::GridGeometry grid;       // {w, 1, l_dec}
  bool IsRowBreak(int32_t t) const { return t % (grid_w + 1) == grid_w; }
};

// The schedule of W x H when it is one of `sizes`; else InvalidArgument
// naming the size, the rule and some sizes.
absl::StatusOr<Emu3Schedule> MakeEmu3Schedule(const std::vector<std::pair<int32_t, int32_t>>& sizes, int32_t width,
                                              int32_t height, int32_t pixels_per_code, int32_t row_end_id,
                                              const std::string& rule);

}  // namespace argen::emu3
