// Test helpers of the VQ decoder tests: a random-weight checkpoint of any
// VQ-16 shape, random token grids, and the pixel error of one decoder against
// another (8-bit levels and PSNR over the official RGB8 conversion).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/checkpoint/checkpoint.h"
#include "engine/vq/pixels.h"
#include "engine/vq/vq_config.h"

namespace argen::vq::testing {

// Every tensor exists with the asked shape, deterministic per name: conv
// weights ~ N(0, 1/fan_in); with random_affine, biases ~ N(0, 0.1) and
// GroupNorm weight 1 + N(0, 0.1), bias N(0, 0.1) (so every bias and affine
// path is exercised); otherwise biases 0 and norm weights 1. Codebook N(0, 1).
class RandomCheckpoint final : public checkpoint::Checkpoint {
 public:
  explicit RandomCheckpoint(bool random_affine = true) : random_affine_(random_affine) {}
  const std::string& dir() const override { return dir_; }
  bool Has(std::string_view) const override { return true; }
  absl::StatusOr<const checkpoint::TensorInfo*> Find(std::string_view name) const override {
    return absl::UnimplementedError(absl::StrCat("random checkpoint: no raw tensor ", std::string(name)));
  }
  absl::Status ReadRowsF32(std::string_view name, const int32_t*, int64_t, float*) const override {
    return absl::UnimplementedError(absl::StrCat("random checkpoint: no rows of ", std::string(name)));
  }
  absl::StatusOr<std::vector<float>> LoadF32(std::string_view name, const std::vector<int64_t>& shape) const override {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::vector<float> v(static_cast<size_t>(n));
    std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string_view>{}(name)));
    std::normal_distribution<float> small(0.0f, 0.1f);
    if (shape.size() == 1) {
      const bool bias = name.ends_with(".bias");
      for (float& x : v) x = (bias ? 0.0f : 1.0f) + (random_affine_ ? small(rng) : 0.0f);
      return v;
    }
    const double fan_in = shape.size() == 4 ? static_cast<double>(shape[1] * shape[2] * shape[3]) : 1.0;
    std::normal_distribution<float> dist(0.0f, static_cast<float>(1.0 / std::sqrt(fan_in)));
    for (float& x : v) x = dist(rng);
    return v;
  }

 private:
  bool random_affine_;
  std::string dir_ = "<random>";
};

inline std::vector<std::vector<int32_t>> RandomGrids(const vq::Vq16Config& config, int count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> id(0, config.codebook_size - 1);
  std::vector<std::vector<int32_t>> grids(count, std::vector<int32_t>(config.image_tokens()));
  for (auto& g : grids)
    for (int32_t& t : g) t = id(rng);
  return grids;
}

struct PixelError {
  double max_float = 0;  // max |got - want| of the float output
  double rms_float = 0;
  int max_level = 0;      // max |got - want| of the RGB8 bytes
  double mean_level = 0;  // mean |got - want| of the bytes
  double psnr_db = 0;     // over the bytes (inf when equal)
  size_t bytes = 0;
  std::string Describe() const {
    return absl::StrCat("max float error ", max_float, ", rms ", rms_float, "; RGB8: max ", max_level, " levels, mean ",
                        mean_level, ", PSNR ", psnr_db, " dB over ", bytes, " bytes");
  }
};

// got/want: CHW floats per image; image i is sizes[i] = (height, width).
inline PixelError ComparePixels(const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& want,
                                const std::vector<std::pair<int32_t, int32_t>>& sizes) {
  PixelError e;
  double sq_float = 0, sq_level = 0, sum_level = 0;
  size_t floats = 0;
  std::vector<uint8_t> a, b;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    const auto [h, w] = i < sizes.size() ? sizes[i] : std::pair<int32_t, int32_t>{0, 0};
    a.assign(3 * static_cast<size_t>(h) * w, 0);
    b.assign(a.size(), 0);
    if (a.empty() || got[i].size() != a.size() || want[i].size() != a.size()) {
      e.max_float = INFINITY;
      continue;
    }
    for (size_t p = 0; p < a.size(); ++p) {
      const double d = std::abs(double{got[i][p]} - want[i][p]);
      e.max_float = std::isnan(d) ? INFINITY : std::max(e.max_float, d);
      sq_float += d * d;
    }
    floats += a.size();
    ChwToRgb8(got[i].data(), h, w, a.data());
    ChwToRgb8(want[i].data(), h, w, b.data());
    for (size_t p = 0; p < a.size(); ++p) {
      const int d = std::abs(int{a[p]} - int{b[p]});
      e.max_level = std::max(e.max_level, d);
      sum_level += d;
      sq_level += static_cast<double>(d) * d;
    }
    e.bytes += a.size();
  }
  if (floats > 0) e.rms_float = std::sqrt(sq_float / floats);
  if (e.bytes > 0) {
    e.mean_level = sum_level / e.bytes;
    const double mse = sq_level / e.bytes;
    e.psnr_db = mse > 0 ? 10.0 * std::log10(255.0 * 255.0 / mse) : INFINITY;
  }
  return e;
}

// got/want: CHW floats per image of `side` x `side` images.
inline PixelError ComparePixels(const std::vector<std::vector<float>>& got, const std::vector<std::vector<float>>& want,
                                int32_t side) {
  return ComparePixels(got, want, std::vector<std::pair<int32_t, int32_t>>(got.size(), {side, side}));
}

}  // namespace argen::vq::testing
