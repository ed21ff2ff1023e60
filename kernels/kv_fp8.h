// FP8 KV storage (kv_cache_dtype "fp8"): e4m3 codes with one fp32 scale per
// stored vector (one key or one value of one kv head at one position), so
// each vector uses the whole e4m3 range whatever its magnitude.
//
// Written once for the host and the device: the CUDA KV append encodes with
// EncodeE4m3, the CPU backend rounds its f32 KV through the same functions,
// and the attention kernel decodes with the hardware conversion (exact, as
// fp8 -> half is; a GPU test checks both directions against CUDA's own
// conversions).
//
// A row's region in fp8 (byte offsets from its start; capacity positions per
// (layer, kv head), as in kernels/token_meta.h):
//   K codes  [layer][kv_head][capacity][head_dim] u8, then V codes alike,
//   K scales [layer][kv_head][capacity] f32,          then V scales alike.
#pragma once

#include <math.h>

#include <cstdint>

#if defined(__CUDACC__)
#define ARGEN_FP8_HD __host__ __device__ inline
#else
#define ARGEN_FP8_HD inline
#endif

namespace argen::kernels {

inline constexpr float kE4m3Max = 448.0f;

// The e4m3 code of x (OCP E4M3FN: bias 7, subnormals, no infinities), rounded
// to the nearest code, ties to even, saturating to +-448; NaN gives 0x7f.
ARGEN_FP8_HD uint8_t EncodeE4m3(float x) {
  const uint8_t sign = signbit(x) ? 0x80 : 0x00;
  const float a = fabsf(x);
  if (a != a) return 0x7f;
  if (a >= kE4m3Max) return sign | 0x7e;
  if (a < 0.015625f) {  // below 2^-6: subnormal steps of 2^-9 (8 steps reach the smallest normal, code 0x08)
    return sign | static_cast<uint8_t>(rintf(a * 512.0f));
  }
  int e = 0;
  const float f = frexpf(a, &e);                                 // a = f * 2^e, f in [0.5, 1)
  int mant = static_cast<int>(rintf((2.0f * f - 1.0f) * 8.0f));  // exact before rounding
  int biased = e - 1 + 7;
  if (mant == 8) {
    mant = 0;
    ++biased;
  }
  return sign | static_cast<uint8_t>((biased << 3) | mant);  // a < 448 keeps biased <= 15, mant <= 6 there
}

ARGEN_FP8_HD float DecodeE4m3(uint8_t code) {
  const int exp = (code >> 3) & 15, mant = code & 7;
  float v;
  if (exp == 15 && mant == 7) {
    v = NAN;
  } else if (exp == 0) {
    v = ldexpf(static_cast<float>(mant), -9);
  } else {
    v = ldexpf(1.0f + static_cast<float>(mant) / 8.0f, exp - 7);
  }
  return (code & 0x80) ? -v : v;
}

// The scale of a vector whose largest magnitude is amax: amax / 448, so the
// largest element encodes to +-448; 0 for an all-zero vector (codes 0).
ARGEN_FP8_HD float E4m3Scale(float amax) { return amax / kE4m3Max; }

// The code of x in a vector of that scale.
ARGEN_FP8_HD uint8_t EncodeScaled(float x, float scale) { return scale > 0.0f ? EncodeE4m3(x / scale) : 0; }

// x[0..n) replaced by what fp8 storage gives back: decode(code) * scale.
ARGEN_FP8_HD void RoundThroughE4m3(float* x, int32_t n) {
  float amax = 0.0f;
  for (int32_t i = 0; i < n; ++i) amax = fmaxf(amax, fabsf(x[i]));
  const float scale = E4m3Scale(amax);
  for (int32_t i = 0; i < n; ++i) x[i] = DecodeE4m3(EncodeScaled(x[i], scale)) * scale;
}

// Byte offsets of an fp8 region's parts (see the top of this file).
struct Fp8KvRegion {
  int64_t v_codes = 0, k_scales = 0, v_scales = 0, total = 0;
};

ARGEN_FP8_HD Fp8KvRegion Fp8Region(int32_t layers, int32_t kv_heads, int32_t capacity, int32_t head_dim) {
  const int64_t vectors = static_cast<int64_t>(layers) * kv_heads * capacity;
  Fp8KvRegion r;
  r.v_codes = vectors * head_dim;
  r.k_scales = 2 * vectors * head_dim;
  r.v_scales = r.k_scales + vectors * 4;
  r.total = r.v_scales + vectors * 4;
  return r;
}

}  // namespace argen::kernels
