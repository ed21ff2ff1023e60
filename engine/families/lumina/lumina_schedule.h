// Lumina-mGPT's image sizes and the decode schedule of one size
// (docs/lumina-mgpt.md "The decode sequence", "Supported sizes").
//
// After the prompt the model writes <racm3:break>, the height and width
// tokens (the header, prefilled here: the request fixes the size), then h =
// H/16 rows of w = W/16 image tokens each closed by the new-line token
// <reserved08799>, then <eoss>. argen's decode tokens are the rows without the
// last new line: L_dec = h*w + h - 1, the new lines at t = (r + 1)(w + 1) - 1
// forced (fed back, so they write KV like any token); the last new line and
// <eoss> need no forward pass. The row lag of the attention pattern is w + 1.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/sparse/policy_types.h"

namespace argen::lumina {

// Pixels per VQGAN code (16x downsampling).
inline constexpr int32_t kPixelsPerCode = 16;

// Lumina-mGPT's generate_crop_size_list((target / 32)^2, 32): every (W, H),
// multiples of 32 with (W/32)(H/32) <= (target/32)^2 and aspect ratio at most
// 4, from wide to tall. 512: 49 sizes, 768: 73, 1024: 97.
std::vector<std::pair<int32_t, int32_t>> CropSizeList(int32_t target);

// "384x384, 512x256, ..." for messages.
std::string SizeListText(const std::vector<std::pair<int32_t, int32_t>>& sizes);

struct LuminaSchedule {
  int32_t width = 0, height = 0;   // pixels
  int32_t grid_w = 0, grid_h = 0;  // codes per row, rows
  int32_t l_dec = 0;               // decode tokens: h*w + h - 1
  int32_t l_gen = 0;               // everything generated after the prompt: 3 + h(w + 1) + 1
  std::vector<int32_t> forced;     // [l_dec]: new_line_id at the row ends, -1 where sampled
  sparse::GridGeometry grid;       // {w, 1, l_dec}
  bool IsRowBreak(int32_t t) const { return t % (grid_w + 1) == grid_w; }
};

// The schedule of W x H when it is one of `sizes`; else InvalidArgument
// naming the size and listing the supported ones.
absl::StatusOr<LuminaSchedule> MakeSchedule(const std::vector<std::pair<int32_t, int32_t>>& sizes, int32_t width,
                                            int32_t height, int32_t new_line_id);

}  // namespace argen::lumina
