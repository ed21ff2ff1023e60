#include "engine/families/lumina/lumina_schedule.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace argen::lumina {

std::vector<std::pair<int32_t, int32_t>> CropSizeList(int32_t target) {
  constexpr int32_t kPatch = 32;
  constexpr int32_t kMaxRatio = 4;
  const int32_t patches = (target / kPatch) * (target / kPatch);
  std::vector<std::pair<int32_t, int32_t>> sizes;
  int32_t wp = patches, hp = 1;
  while (wp > 0) {
    if (std::max(wp, hp) <= kMaxRatio * std::min(wp, hp)) sizes.emplace_back(wp * kPatch, hp * kPatch);
    if ((hp + 1) * wp <= patches) {
      ++hp;
    } else {
      --wp;
    }
  }
  return sizes;
}

std::string SizeListText(const std::vector<std::pair<int32_t, int32_t>>& sizes) {
  return absl::StrJoin(sizes, ", ", [](std::string* out, const std::pair<int32_t, int32_t>& s) {
    absl::StrAppend(out, s.first, "x", s.second);
  });
}

absl::StatusOr<LuminaSchedule> MakeSchedule(const std::vector<std::pair<int32_t, int32_t>>& sizes, int32_t width,
                                            int32_t height, int32_t new_line_id) {
  if (std::find(sizes.begin(), sizes.end(), std::pair{width, height}) == sizes.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("image size ", width, "x", height,
                     " is not supported by this checkpoint; supported (WxH): ", SizeListText(sizes)));
  }
  LuminaSchedule s;
  s.width = width;
  s.height = height;
  s.grid_w = width / kPixelsPerCode;
  s.grid_h = height / kPixelsPerCode;
  s.l_dec = s.grid_h * s.grid_w + s.grid_h - 1;
  s.l_gen = 3 + s.grid_h * (s.grid_w + 1) + 1;
  s.forced.assign(s.l_dec, -1);
  for (int32_t t = 0; t < s.l_dec; ++t) {
    if (s.IsRowBreak(t)) s.forced[t] = new_line_id;
  }
  s.grid = sparse::GridGeometry{s.grid_w, 1, s.l_dec};
  // N_r: 2 2/3 rows (row ends included), measured best on the shipped Janus-layout and Lumina-format
  // models (docs/policies.md "Per-family N_r").
  s.grid.default_n_recent = sparse::RecentRowsWindow(s.grid, 8, 3);
  return s;
}

}  // namespace argen::lumina
