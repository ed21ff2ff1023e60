// A scene-like test image (pale background, a few flat saturated boxes, mild
// noise), as the model's images look: the PNG encoder's test and benchmark
// both encode it (header-only).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "engine/image/png.h"

namespace argen::test_support {

inline image::Rgb8Image SceneImage(int32_t size, uint32_t seed) {
  std::mt19937 rng(seed);
  image::Rgb8Image img{size, size, std::vector<uint8_t>(static_cast<size_t>(size) * size * 3)};
  for (int32_t y = 0; y < size; ++y) {
    for (int32_t x = 0; x < size; ++x) {
      uint8_t* p = &img.rgb[(static_cast<size_t>(y) * size + x) * 3];
      const bool box = (x / 40 + y / 50) % 3 == 0;
      p[0] = static_cast<uint8_t>((box ? 200 : 235) + rng() % 8);
      p[1] = static_cast<uint8_t>((box ? 40 : 230) + rng() % 8);
      p[2] = static_cast<uint8_t>((box ? 30 : 225) + rng() % 8);
    }
  }
  return img;
}

}  // namespace argen::test_support
