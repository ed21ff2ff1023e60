#include "engine/checkpoint/dtype.h"

#include <cstring>

namespace argen::checkpoint {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32: return 4;
    case DType::kF16: return 2;
    case DType::kBF16: return 2;
  }
  return 0;
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32: return "F32";
    case DType::kF16: return "F16";
    case DType::kBF16: return "BF16";
  }
  return "?";
}

float Bf16ToF32(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Branch-free half -> float: move exponent and mantissa into place, rebias
// with one multiply (which also normalises subnormals), and patch inf/NaN.
float F16ToF32(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t body = static_cast<uint32_t>(bits & 0x7fffu) << 13;
  float f;
  std::memcpy(&f, &body, 4);
  f *= 0x1p112f;  // 2^(127-15): rebias the exponent
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((bits & 0x7c00u) == 0x7c00u) u = body | 0x7f800000u;  // inf / NaN keep their payload
  u |= sign;
  std::memcpy(&f, &u, 4);
  return f;
}

namespace {

template <typename Fn>
void Convert16(const unsigned char* src, size_t n, float* dst, Fn fn) {
  for (size_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, src + 2 * i, 2);
    dst[i] = fn(bits);
  }
}

}  // namespace

void ConvertToF32(DType dtype, const void* src, size_t n, float* dst) {
  const auto* bytes = static_cast<const unsigned char*>(src);
  switch (dtype) {
    case DType::kF32:
      std::memcpy(dst, bytes, n * sizeof(float));
      return;
    case DType::kBF16:
      Convert16(bytes, n, dst, Bf16ToF32);
      return;
    case DType::kF16:
      Convert16(bytes, n, dst, F16ToF32);
      return;
  }
}

}  // namespace argen::checkpoint
