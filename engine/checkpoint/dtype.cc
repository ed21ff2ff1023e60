#include "engine/checkpoint/dtype.h"

#include <cstring>

namespace argen::checkpoint {

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kF16:
      return 2;
    case DType::kBF16:
      return 2;
  }
  return 0;
}

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kF16:
      return "F16";
    case DType::kBF16:
      return "BF16";
  }
  return "?";
}

namespace {

// Inline bodies so the conversion loops below vectorise (no call per element).
inline float Bf16Bits(uint16_t bits) {
  const uint32_t u = static_cast<uint32_t>(bits) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Branch-free half -> float in the integer domain: rebias the exponent by
// adding to the bits; inf/NaN get the maximum exponent; subnormals are
// normalised with one float subtraction of normal numbers (no denormal
// arithmetic, which is slow on x86). Selects, not branches, so it vectorises.
inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float BitsFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float F16Bits(uint16_t bits) {
  constexpr uint32_t kExpMask = 0x7c00u << 13;  // the f16 exponent, in f32 position
  const uint32_t body = static_cast<uint32_t>(bits & 0x7fffu) << 13;
  const uint32_t exp = body & kExpMask;
  const uint32_t normal = body + ((127u - 15u) << 23);
  const uint32_t inf_nan = body + ((255u - 31u) << 23);
  const uint32_t subnormal = FloatBits(BitsFloat(body + (113u << 23)) - BitsFloat(113u << 23));
  const uint32_t magnitude = exp == kExpMask ? inf_nan : exp == 0 ? subnormal : normal;
  return BitsFloat(magnitude | (static_cast<uint32_t>(bits & 0x8000u) << 16));
}

template <typename Fn>
void Convert16(const unsigned char* src, size_t n, float* dst, Fn fn) {
  for (size_t i = 0; i < n; ++i) {
    uint16_t bits;
    std::memcpy(&bits, src + 2 * i, 2);
    dst[i] = fn(bits);
  }
}

}  // namespace

float Bf16ToF32(uint16_t bits) { return Bf16Bits(bits); }
float F16ToF32(uint16_t bits) { return F16Bits(bits); }

void ConvertToF32(DType dtype, const void* src, size_t n, float* dst) {
  if (n == 0) return;  // empty tensors: src and dst may be null (memcpy must not see them)
  const auto* bytes = static_cast<const unsigned char*>(src);
  switch (dtype) {
    case DType::kF32:
      std::memcpy(dst, bytes, n * sizeof(float));
      return;
    case DType::kBF16:
      Convert16(bytes, n, dst, [](uint16_t b) { return Bf16Bits(b); });
      return;
    case DType::kF16:
      Convert16(bytes, n, dst, [](uint16_t b) { return F16Bits(b); });
      return;
  }
}

}  // namespace argen::checkpoint
