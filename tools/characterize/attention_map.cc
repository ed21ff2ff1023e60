#include "tools/characterize/attention_map.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace argen::characterize {
namespace {

// A perceptual dark-to-bright ramp (black, purple, orange, pale yellow),
// linear between control points.
void Ramp(double x, uint8_t* px) {
  static constexpr double kStops[][3] = {{0, 0, 4}, {60, 15, 110}, {170, 45, 105}, {250, 130, 30}, {252, 255, 165}};
  constexpr int kN = 5;
  x = std::clamp(x, 0.0, 1.0) * (kN - 1);
  const int i = std::min(static_cast<int>(x), kN - 2);
  const double f = x - i;
  for (int c = 0; c < 3; ++c) {
    px[c] = static_cast<uint8_t>(std::lround(kStops[i][c] * (1 - f) + kStops[i + 1][c] * f));
  }
}

}  // namespace

AttentionMap::AttentionMap(int32_t prompt_len, int32_t max_queries)
    : prompt_len_(prompt_len),
      max_queries_(max_queries),
      data_(static_cast<size_t>(max_queries) * (prompt_len + max_queries), 0.0f) {}

absl::Status AttentionMap::AddQuery(std::span<const float> probs) {
  const int32_t t = queries_;
  if (t >= max_queries_) {
    return absl::OutOfRangeError(absl::StrCat("attention map: query ", t, " beyond ", max_queries_));
  }
  if (static_cast<int32_t>(probs.size()) != prompt_len_ + t + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("attention map: query ", t, " has ", probs.size(), " weights, expected ", prompt_len_ + t + 1));
  }
  std::memcpy(data_.data() + static_cast<size_t>(t) * keys(), probs.data(), sizeof(float) * probs.size());
  ++queries_;
  return absl::OkStatus();
}

Rgb8Image AttentionMap::Heatmap(double decades) const {
  Rgb8Image img;
  img.width = keys();
  img.height = std::max(queries_, 1);
  img.rgb.assign(static_cast<size_t>(img.width) * img.height * 3, 0);
  for (int32_t q = 0; q < queries_; ++q) {
    for (int32_t k = 0; k < keys(); ++k) {
      const float p = at(q, k);
      if (!(p > 0)) continue;
      Ramp((std::log10(static_cast<double>(p)) + decades) / decades,
           img.rgb.data() + (static_cast<size_t>(q) * img.width + k) * 3);
    }
  }
  return img;
}

}  // namespace argen::characterize
