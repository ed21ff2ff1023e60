// The e4m3 encode/decode of kernels/kv_fp8.h (what the CUDA append writes and
// the CPU backend rounds through) against the OCP E4M3FN definition: every
// code's value, round to nearest with ties to even between neighbouring codes,
// saturation, and the per-vector scaled rounding's error bound.
#include "kernels/kv_fp8.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace argen::kernels {
namespace {

// The value of a code from the format's definition (bias 7, 3 mantissa bits).
double Definition(int code) {
  const int exp = (code >> 3) & 15, mant = code & 7;
  const double v = exp == 0 ? std::ldexp(mant, -9) : std::ldexp(1.0 + mant / 8.0, exp - 7);
  return (code & 0x80) ? -v : v;
}

TEST(KvFp8Test, EveryCodeDecodesToItsValueAndEncodesBack) {
  for (int code = 0; code < 256; ++code) {
    if ((code & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(DecodeE4m3(static_cast<uint8_t>(code))));
      continue;
    }
    const float v = DecodeE4m3(static_cast<uint8_t>(code));
    EXPECT_EQ(v, static_cast<float>(Definition(code))) << "code " << code;
    if (code == 0x80) {
      EXPECT_EQ(EncodeE4m3(v), 0x80);  // -0 keeps its sign
    } else {
      EXPECT_EQ(EncodeE4m3(v), code) << "value " << v;
    }
  }
  EXPECT_EQ(DecodeE4m3(0x7e), 448.0f);
  EXPECT_EQ(DecodeE4m3(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(DecodeE4m3(0x08), std::ldexp(1.0f, -6));
}

TEST(KvFp8Test, RoundsToTheNearestCodeTiesToEven) {
  // Between each pair of neighbouring positive codes: just below, at and
  // just above the midpoint.
  for (int code = 0; code < 0x7e; ++code) {
    const double lo = Definition(code), hi = Definition(code + 1), mid = (lo + hi) / 2;
    const int even = (code % 2 == 0) ? code : code + 1;
    EXPECT_EQ(EncodeE4m3(static_cast<float>(mid)), even) << "midpoint of codes " << code << ", " << code + 1;
    EXPECT_EQ(EncodeE4m3(std::nextafter(static_cast<float>(mid), 0.f)), code);
    EXPECT_EQ(EncodeE4m3(std::nextafter(static_cast<float>(mid), 1e9f)), code + 1);
    EXPECT_EQ(EncodeE4m3(static_cast<float>(-mid)), 0x80 | even);
  }
}

TEST(KvFp8Test, SaturatesAndMapsNanToTheNanCode) {
  EXPECT_EQ(EncodeE4m3(448.0f), 0x7e);
  EXPECT_EQ(EncodeE4m3(460.0f), 0x7e);
  EXPECT_EQ(EncodeE4m3(1e30f), 0x7e);
  EXPECT_EQ(EncodeE4m3(-INFINITY), 0xfe);
  EXPECT_EQ(EncodeE4m3(NAN), 0x7f);
  EXPECT_EQ(EncodeE4m3(1e-30f), 0x00);
}

TEST(KvFp8Test, ScaledRoundingKeepsEachElementWithinHalfAStepOfItsBinade) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.f, 3.f);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> x(128);
    for (float& v : x) v = nd(rng) * (trial % 7 == 0 ? 1e-3f : 1.f);
    std::vector<float> r = x;
    RoundThroughE4m3(r.data(), static_cast<int32_t>(r.size()));
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    const double scale = amax / 448.0;
    for (size_t i = 0; i < x.size(); ++i) {
      // Normal range: relative error <= 2^-4; subnormal range: <= 2^-10 * scale absolute.
      const double err = std::fabs(static_cast<double>(r[i]) - x[i]);
      EXPECT_LE(err, std::max(std::fabs(x[i]) * 0.0625, std::ldexp(scale, -10)) * (1 + 1e-6))
          << "trial " << trial << " element " << i;
    }
    // The largest element is exact (it encodes to 448).
    const auto big = std::max_element(x.begin(), x.end(), [](float a, float b) { return std::fabs(a) < std::fabs(b); });
    EXPECT_NEAR(r[big - x.begin()], *big, std::fabs(*big) * 1e-6);
  }
  std::vector<float> zeros(16, 0.f);
  RoundThroughE4m3(zeros.data(), 16);
  for (float v : zeros) EXPECT_EQ(v, 0.f);
}

TEST(KvFp8Test, RegionPartsFollowEachOther) {
  const Fp8KvRegion r = Fp8Region(2, 3, 10, 16);
  EXPECT_EQ(r.v_codes, 2 * 3 * 10 * 16);
  EXPECT_EQ(r.k_scales, 2 * 2 * 3 * 10 * 16);
  EXPECT_EQ(r.v_scales, r.k_scales + 2 * 3 * 10 * 4);
  EXPECT_EQ(r.total, r.v_scales + 2 * 3 * 10 * 4);
}

}  // namespace
}  // namespace argen::kernels
