// The dot product of the CPU attention kernels (prefill and decode).
#pragma once

#include <cstdint>

namespace argen::cpu {

// Eight independent partial sums so the compiler vectorizes the loop without
// -ffast-math (a single accumulator chain cannot be reordered). Prefill and
// decode share it so both round identically.
inline float Dot(const float* a, const float* b, int32_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int32_t l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  }
  float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

}  // namespace argen::cpu
