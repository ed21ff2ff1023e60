// The full decode-phase attention map of one (layer, head), for heatmaps:
// row t = query t's weights over prompt keys then decode keys 0..t.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"

namespace argen::characterize {

struct Rgb8Image {
  int32_t width = 0, height = 0;
  std::vector<uint8_t> rgb;  // row-major, 3 bytes a pixel
};

class AttentionMap {
 public:
  AttentionMap(int32_t prompt_len, int32_t max_queries);

  // Adds query t = queries(); probs.size() must be prompt_len + t + 1.
  absl::Status AddQuery(std::span<const float> probs);

  int32_t queries() const { return queries_; }
  int32_t prompt_len() const { return prompt_len_; }
  int32_t keys() const { return prompt_len_ + max_queries_; }
  float at(int32_t query, int32_t key) const { return data_[static_cast<size_t>(query) * keys() + key]; }

  // One pixel per (query, key): rows are queries (top: t = 0), columns keys
  // (prompt first). Log colour scale: weights from 10^-decades..1 map onto a
  // dark-to-bright ramp; 0 and future keys are black.
  Rgb8Image Heatmap(double decades = 4.0) const;

 private:
  int32_t prompt_len_, max_queries_, queries_ = 0;
  std::vector<float> data_;
};

}  // namespace argen::characterize
