#include "engine/families/emu3/emu3_schedule.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace argen::emu3 {

std::vector<std::pair<int32_t, int32_t>> Emu3Sizes(int32_t image_area, int32_t f) {
  const double a = static_cast<double>(image_area) / (static_cast<double>(f) * f);
  std::vector<std::pair<int32_t, int32_t>> sizes;
  const int32_t most = static_cast<int32_t>(std::ceil(std::sqrt(a * kMaxAspectRatio))) + 1;
  for (int32_t w = most; w >= 1; --w) {
    for (int32_t h = 1; h <= most; ++h) {
      if (std::max(w, h) > kMaxAspectRatio * std::min(w, h)) continue;
      if ((w - 0.5) * (h - 0.5) <= a && a <= (w + 0.5) * (h + 0.5)) sizes.emplace_back(w * f, h * f);
    }
  }
  return sizes;
}

std::pair<int32_t, int32_t> Emu3DefaultSize(int32_t image_area, int32_t f) {
  const double a = static_cast<double>(image_area) / (static_cast<double>(f) * f);
  const int32_t side = std::max<int32_t>(1, static_cast<int32_t>(std::lround(std::sqrt(a))));
  return {side * f, side * f};
}

std::string Emu3SizeRule(int32_t image_area, int32_t f) {
  const double a = static_cast<double>(image_area) / (static_cast<double>(f) * f);
  return absl::StrCat("width and height multiples of ", f, " whose code grid w x h (w = width/", f, ", h = height/", f,
                      ") is Emu3's rounding of the image area ", image_area,
                      " px at some aspect ratio: (w - 1/2)(h - 1/2) <= ", a,
                      " <= (w + 1/2)(h + 1/2), aspect ratio at most ", kMaxAspectRatio);
}

absl::StatusOr<Emu3Schedule> MakeEmu3Schedule(const std::vector<std::pair<int32_t, int32_t>>& sizes, int32_t width,
                                              int32_t height, int32_t f, int32_t row_end_id, const std::string& rule) {
  if (std::find(sizes.begin(), sizes.end(), std::pair{width, height}) == sizes.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("image size ", width, "x", height, " is not one Emu3 makes; the rule: ", rule));
  }
  Emu3Schedule s;
  s.width = width;
  s.height = height;
  s.grid_w = width / f;
  s.grid_h = height / f;
  s.l_dec = s.grid_h * (s.grid_w + 1) - 1;
  s.forced.assign(s.l_dec, -1);
  for (int32_t t = 0; t < s.l_dec; ++t) {
    if (s.IsRowBreak(t)) s.forced[t] = row_end_id;
  }
  s.grid = sparse::GridGeometry{s.grid_w, 1, s.l_dec};
  // N_r: 2 2/3 rows (row ends included), measured best on the shipped Janus-layout and Lumina-format
  // models (docs/policies.md "Per-family N_r").
  s.grid.default_n_recent = sparse::RecentRowsWindow(s.grid, 8, 3);
  return s;
}

}  // namespace argen::emu3
