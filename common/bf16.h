// bf16 on the host: float -> bf16 bits rounded to nearest even (a NaN stays
// a quiet NaN), and back. One definition for every host path that rounds as
// the GPU's bf16 storage does (the VQ decoder's program, the CPU backend's
// fp8 reference).
#pragma once

#include <cstdint>
#include <cstring>

namespace argen {

inline uint16_t FloatToBf16Bits(float f) {
  uint32_t u = 0;
  std::memcpy(&u, &f, sizeof(u));
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float Bf16BitsToFloat(uint16_t b) {
  const uint32_t u = uint32_t{b} << 16;
  float f = 0;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

// f rounded to the nearest bf16 value.
inline float RoundToBf16(float f) { return Bf16BitsToFloat(FloatToBf16Bits(f)); }

}  // namespace argen
