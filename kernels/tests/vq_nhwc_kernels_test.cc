// The VQ decoder's bf16 NHWC kernels against float64 host references on
// random inputs: lookup and the bias adds bit for bit, GroupNorm, softmax and
// Emu3's affine + swish and SpatialNorm modulation within their bf16 output
// rounding, conv_out within fp32 accumulation.
#include "kernels/vq_nhwc_kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/tests/cuda_test_util.h"

namespace argen::kernels {
namespace {

using bf16 = __nv_bfloat16;
using testing::Bf16Bits;
using testing::DeviceArray;
using testing::FromBf16Bits;
using testing::RandomFloats;
using testing::RoundBf16;
using testing::ToBf16;

bf16* AsBf16(DeviceArray<Bf16Bits>& a) { return reinterpret_cast<bf16*>(a.get()); }

std::vector<float> Bf16ToFloat(const std::vector<Bf16Bits>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = FromBf16Bits(v[i]);
  return out;
}

class VqNhwcKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(testing::RequireDevice()); }
  std::mt19937 rng_{4321};
};

TEST_F(VqNhwcKernelsTest, LookupCopiesRowsAndZeroesInvalidIds) {
  const int rows = 50, dim = 24;
  const auto table_h = ToBf16(RandomFloats(rng_, rows * dim));
  const std::vector<int32_t> ids = {0, 49, 7, -1, 50, 7, 1 << 30, 3};
  DeviceArray<Bf16Bits> table(table_h);
  DeviceArray<int32_t> ids_d(ids);
  DeviceArray<Bf16Bits> out(ids.size() * dim);
  out.Poison();
  ARGEN_CUDA_OK(VqNhwcLookup(AsBf16(table), rows, dim, ids_d.get(), ids.size(), AsBf16(out), 0));
  ARGEN_CUDA_OK(cudaDeviceSynchronize());
  const auto got = out.Download();
  for (size_t i = 0; i < ids.size(); ++i) {
    const bool valid = ids[i] >= 0 && ids[i] < rows;
    for (int c = 0; c < dim; ++c)
      ASSERT_EQ(got[i * dim + c], valid ? table_h[ids[i] * dim + c] : Bf16Bits{0}) << i << " " << c;
  }
  EXPECT_EQ(VqNhwcLookup(AsBf16(table), rows, 12, ids_d.get(), ids.size(), AsBf16(out), 0), cudaErrorInvalidValue);
}

struct GnCase {
  int images;
  int64_t hw;
  int channels, groups;
  bool swish, bias, in_place;
  float offset;  // added to the input bias: a large common mean
};

TEST_F(VqNhwcKernelsTest, GroupNormMatchesFloat64) {
  const std::vector<GnCase> cases = {
      {3, 24 * 24, 512, 32, false, true, false, 0.0f},  // attention norm: 16 channels a group, one partial chunk
      {2, 48 * 48, 128, 32, true, true, false, 0.0f},   // 4 channels a group, 4.5 chunks
      {1, 1000, 32, 32, true, false, true, 0.0f},       // one channel a group, in place
      {2, 700, 2048, 32, true, true, false, 0.0f},      // the widest the statistics kernel takes
      {2, 3000, 64, 32, true, true, false, 100.0f},     // mean 100x the spread: the double sums keep it exact
      {4, 64, 256, 8, false, false, false, 0.0f},
  };
  for (const GnCase& k : cases) {
    SCOPED_TRACE(::testing::Message() << "images " << k.images << " hw " << k.hw << " channels " << k.channels
                                      << " groups " << k.groups);
    const size_t n = static_cast<size_t>(k.images) * k.hw * k.channels;
    const auto x_h = ToBf16(RandomFloats(rng_, n, 2.0f));
    auto bias_h = RandomFloats(rng_, k.channels, 0.5f);
    for (float& b : bias_h) b += k.offset;
    auto gamma_h = RandomFloats(rng_, k.channels, 0.3f);
    for (float& g : gamma_h) g += 1.0f;
    const auto beta_h = RandomFloats(rng_, k.channels, 0.3f);
    DeviceArray<Bf16Bits> x(x_h), y(n);
    DeviceArray<float> bias(bias_h), gamma(gamma_h), beta(beta_h);
    DeviceArray<double2> partial(VqGroupNormPartialBytes(k.images, k.hw, k.channels) / sizeof(double2));
    DeviceArray<float2> ss(static_cast<size_t>(k.images) * k.channels);
    y.Poison();
    bf16* out = k.in_place ? AsBf16(x) : AsBf16(y);
    ARGEN_CUDA_OK(VqNhwcGroupNorm(AsBf16(x), k.bias ? bias.get() : nullptr, gamma.get(), beta.get(), k.images, k.hw,
                                  k.channels, k.groups, 1e-6f, k.swish, partial.get(), ss.get(), out, 0));
    ARGEN_CUDA_OK(cudaDeviceSynchronize());
    const auto got = Bf16ToFloat(k.in_place ? x.Download() : y.Download());
    const auto xf = Bf16ToFloat(x_h);
    const int cpg = k.channels / k.groups;
    double max_err = 0;
    for (int img = 0; img < k.images; ++img) {
      for (int g = 0; g < k.groups; ++g) {
        double sum = 0, sq = 0;
        const double count = static_cast<double>(cpg) * k.hw;
        for (int64_t p = 0; p < k.hw; ++p)
          for (int cc = 0; cc < cpg; ++cc) {
            const int c = g * cpg + cc;
            const double v = double{xf[(img * k.hw + p) * k.channels + c]} + (k.bias ? bias_h[c] : 0.0);
            sum += v;
          }
        const double mean = sum / count;
        for (int64_t p = 0; p < k.hw; ++p)
          for (int cc = 0; cc < cpg; ++cc) {
            const int c = g * cpg + cc;
            const double d = double{xf[(img * k.hw + p) * k.channels + c]} + (k.bias ? bias_h[c] : 0.0) - mean;
            sq += d * d;
          }
        const double inv = 1.0 / std::sqrt(sq / count + 1e-6);
        for (int64_t p = 0; p < k.hw; ++p)
          for (int cc = 0; cc < cpg; ++cc) {
            const int c = g * cpg + cc;
            const size_t i = (img * k.hw + p) * k.channels + c;
            const double v = double{xf[i]} + (k.bias ? bias_h[c] : 0.0);
            double want = (v - mean) * inv * gamma_h[c] + beta_h[c];
            if (k.swish) want = want / (1.0 + std::exp(-want));
            const double err = std::abs(got[i] - want);
            // bf16 output rounding (2^-9 relative) plus fp32 scale/shift arithmetic.
            ASSERT_LE(err, std::ldexp(1.0, -8) * std::abs(want) + 2e-5 * (1.0 + std::abs(k.offset) * inv))
                << "image " << img << " pixel " << p << " channel " << c << ": got " << got[i] << " want " << want;
            max_err = std::max(max_err, err);
          }
      }
    }
    std::cout << "max |err| " << max_err << "\n";
  }
}

TEST_F(VqNhwcKernelsTest, GroupNormRejectsBadShapes) {
  DeviceArray<Bf16Bits> x(64 * 8);
  DeviceArray<float> g(64);
  DeviceArray<double2> partial(64);
  DeviceArray<float2> ss(64);
  EXPECT_EQ(VqNhwcGroupNorm(AsBf16(x), nullptr, g.get(), g.get(), 1, 8, 12, 4, 1e-6f, false, partial.get(), ss.get(),
                            AsBf16(x), 0),
            cudaErrorInvalidValue);  // 12 channels: not 8-channel vectors
  EXPECT_EQ(VqNhwcGroupNorm(AsBf16(x), nullptr, g.get(), g.get(), 1, 8, 64, 3, 1e-6f, false, partial.get(), ss.get(),
                            AsBf16(x), 0),
            cudaErrorInvalidValue);  // 64 channels in 3 groups
}

TEST_F(VqNhwcKernelsTest, UpsampleAndAddBiasAreExact) {
  const int images = 3, h = 5, w = 7, c = 40;
  const auto in_h = ToBf16(RandomFloats(rng_, static_cast<size_t>(images) * h * w * c));
  const auto bias_h = RandomFloats(rng_, c);
  DeviceArray<Bf16Bits> in(in_h), out(static_cast<size_t>(images) * 4 * h * w * c), out_nb(out.size());
  DeviceArray<float> bias(bias_h);
  out.Poison();
  ARGEN_CUDA_OK(VqNhwcUpsample2x(AsBf16(in), bias.get(), images, h, w, c, AsBf16(out), 0));
  ARGEN_CUDA_OK(VqNhwcUpsample2x(AsBf16(in), nullptr, images, h, w, c, AsBf16(out_nb), 0));
  ARGEN_CUDA_OK(cudaDeviceSynchronize());
  const auto got = out.Download();
  const auto got_nb = out_nb.Download();
  for (int n = 0; n < images; ++n)
    for (int y = 0; y < 2 * h; ++y)
      for (int x = 0; x < 2 * w; ++x)
        for (int ch = 0; ch < c; ++ch) {
          const size_t src = ((static_cast<size_t>(n) * h + y / 2) * w + x / 2) * c + ch;
          const size_t dst = ((static_cast<size_t>(n) * 2 * h + y) * 2 * w + x) * c + ch;
          ASSERT_EQ(FromBf16Bits(got[dst]), RoundBf16(FromBf16Bits(in_h[src]) + bias_h[ch]))
              << n << " " << y << " " << x;
          ASSERT_EQ(got_nb[dst], in_h[src]);
        }

  const int64_t rows = 77;
  const int ch3 = 48;
  const auto x_h = ToBf16(RandomFloats(rng_, rows * ch3));
  const auto b_h = RandomFloats(rng_, ch3);
  DeviceArray<Bf16Bits> x(x_h);
  DeviceArray<float> b(b_h);
  ARGEN_CUDA_OK(VqNhwcAddBias(AsBf16(x), b.get(), rows, ch3, 0));
  ARGEN_CUDA_OK(cudaDeviceSynchronize());
  const auto xs = x.Download();
  for (int64_t r = 0; r < rows; ++r)
    for (int ch = 0; ch < ch3; ++ch)
      ASSERT_EQ(FromBf16Bits(xs[r * ch3 + ch]), RoundBf16(FromBf16Bits(x_h[r * ch3 + ch]) + b_h[ch]));
}

double Swish(double y) { return y / (1.0 + std::exp(-y)); }

// Within the bf16 output's rounding (and __expf's few ulps).
void ExpectBf16Close(float got, double want, const std::string& where) {
  ASSERT_LE(std::abs(got - want), std::ldexp(1.0, -8) * std::abs(want) + 1e-5) << where;
}

TEST_F(VqNhwcKernelsTest, Emu3AffineSwishMatchesFloat64) {
  const int64_t rows = 91;
  const int c = 24;
  const auto x_h = ToBf16(RandomFloats(rng_, rows * c, 2.0f));
  const auto scale_h = RandomFloats(rng_, c), shift_h = RandomFloats(rng_, c);
  DeviceArray<Bf16Bits> x(x_h), out(x_h.size()), in_place(x_h);
  DeviceArray<float> scale(scale_h), shift(shift_h);
  ARGEN_CUDA_OK(VqNhwcAffineSwish(AsBf16(x), scale.get(), shift.get(), rows, c, AsBf16(out), 0));
  ARGEN_CUDA_OK(VqNhwcAffineSwish(AsBf16(in_place), nullptr, shift.get(), rows, c, AsBf16(in_place), 0));
  ARGEN_CUDA_OK(cudaDeviceSynchronize());
  const auto got = Bf16ToFloat(out.Download());
  const auto got_unit = Bf16ToFloat(in_place.Download());
  for (int64_t r = 0; r < rows; ++r)
    for (int ch = 0; ch < c; ++ch) {
      const double v = FromBf16Bits(x_h[r * c + ch]);
      ExpectBf16Close(got[r * c + ch], Swish(v * scale_h[ch] + shift_h[ch]), "affine");
      ExpectBf16Close(got_unit[r * c + ch], Swish(v + shift_h[ch]), "scale null, in place");
    }
  EXPECT_EQ(VqNhwcAffineSwish(AsBf16(x), scale.get(), shift.get(), rows, 12, AsBf16(out), 0), cudaErrorInvalidValue);
  EXPECT_EQ(VqNhwcAffineSwish(AsBf16(x), scale.get(), nullptr, rows, c, AsBf16(out), 0), cudaErrorInvalidValue);
}

TEST_F(VqNhwcKernelsTest, Emu3SpatialModulateMatchesFloat64) {
  // A 3 x 2 code grid at 12 x 8 px (each code 4 x 4 px) and at its own resolution.
  const int images = 2, zh = 3, zw = 2, c = 16;
  for (const int f : {4, 1}) {
    const int h = zh * f, w = zw * f;
    for (const bool swish : {true, false}) {
      SCOPED_TRACE(::testing::Message() << "factor " << f << " swish " << swish);
      const auto x_h = ToBf16(RandomFloats(rng_, static_cast<size_t>(images) * h * w * c, 2.0f));
      const auto cond_h = RandomFloats(rng_, static_cast<size_t>(images) * zh * zw * 2 * c);
      const auto bias_h = RandomFloats(rng_, 2 * c, 0.5f);
      DeviceArray<Bf16Bits> x(x_h);
      DeviceArray<float> cond(cond_h), bias(bias_h);
      ARGEN_CUDA_OK(VqNhwcSpatialModulate(AsBf16(x), cond.get(), bias.get(), images, h, w, zh, zw, c, swish, 0));
      ARGEN_CUDA_OK(cudaDeviceSynchronize());
      const auto got = Bf16ToFloat(x.Download());
      for (int n = 0; n < images; ++n)
        for (int y = 0; y < h; ++y)
          for (int xx = 0; xx < w; ++xx) {
            const size_t cell = (static_cast<size_t>(n) * zh + y / f) * zw + xx / f;
            for (int ch = 0; ch < c; ++ch) {
              const size_t p = ((static_cast<size_t>(n) * h + y) * w + xx) * c + ch;
              const double scale = double{cond_h[cell * 2 * c + ch]} + bias_h[ch];
              const double shift = double{cond_h[cell * 2 * c + c + ch]} + bias_h[c + ch];
              const double v = FromBf16Bits(x_h[p]) * scale + shift;
              ExpectBf16Close(got[p], swish ? Swish(v) : v, "modulate");
            }
          }
    }
  }
  DeviceArray<Bf16Bits> x(64);
  DeviceArray<float> cond(64), bias(64);
  EXPECT_EQ(VqNhwcSpatialModulate(AsBf16(x), cond.get(), bias.get(), 1, 2, 2, 1, 1, 12, false, 0),
            cudaErrorInvalidValue);  // channels not a multiple of 8
  EXPECT_EQ(VqNhwcSpatialModulate(AsBf16(x), cond.get(), bias.get(), 1, 2, 2, 3, 1, 8, false, 0),
            cudaErrorInvalidValue);  // a code grid larger than the image
}

TEST_F(VqNhwcKernelsTest, SoftmaxToBf16) {
  for (int n : {576, 33, 1}) {
    const int64_t rows = 19;
    auto s_h = RandomFloats(rng_, rows * n, 4.0f);
    s_h[3] = 80.0f;  // a dominant logit
    DeviceArray<float> s(s_h);
    DeviceArray<Bf16Bits> p(rows * n);
    ARGEN_CUDA_OK(VqSoftmaxRowsToBf16(s.get(), rows, n, AsBf16(p), 0));
    ARGEN_CUDA_OK(cudaDeviceSynchronize());
    const auto got = Bf16ToFloat(p.Download());
    for (int64_t r = 0; r < rows; ++r) {
      double mx = -INFINITY, sum = 0;
      for (int j = 0; j < n; ++j) mx = std::max(mx, double{s_h[r * n + j]});
      for (int j = 0; j < n; ++j) sum += std::exp(s_h[r * n + j] - mx);
      for (int j = 0; j < n; ++j) {
        const double want = std::exp(s_h[r * n + j] - mx) / sum;
        ASSERT_LE(std::abs(got[r * n + j] - want), std::ldexp(1.0, -8) * want + 1e-30) << n << " " << r << " " << j;
      }
    }
  }
}

TEST_F(VqNhwcKernelsTest, ConvOutMatchesFloat64) {
  // cin 8, 32, 128: one to sixteen lanes a pixel; 136: 17 vectors over 32 lanes (some idle).
  for (int cin : {8, 32, 128, 136}) {
    SCOPED_TRACE(::testing::Message() << "cin " << cin);
    const int images = 2, h = 7, w = 9;
    const int64_t hw = int64_t{h} * w;
    const auto x_h = ToBf16(RandomFloats(rng_, images * hw * cin));
    const auto w_h = RandomFloats(rng_, 27 * cin, 0.1f);  // [tap][o][cin]
    const std::vector<float> b_h = {0.25f, -0.5f, 1.0f};
    // Written at image 1 of a 4-image planar output (plane stride 4 * hw).
    const int64_t plane = 4 * hw;
    DeviceArray<Bf16Bits> x(x_h);
    DeviceArray<float> wt(w_h), b(b_h), out(3 * plane);
    out.Poison(0);
    ARGEN_CUDA_OK(VqNhwcConvOut3(AsBf16(x), wt.get(), b.get(), images, h, w, cin, out.get() + hw, plane, 0));
    ARGEN_CUDA_OK(cudaDeviceSynchronize());
    const auto got = out.Download();
    const auto xf = Bf16ToFloat(x_h);
    for (int n = 0; n < images; ++n)
      for (int y = 0; y < h; ++y)
        for (int xx = 0; xx < w; ++xx)
          for (int o = 0; o < 3; ++o) {
            double want = b_h[o], mag = std::abs(b_h[o]);
            for (int tap = 0; tap < 9; ++tap) {
              const int sy = y + tap / 3 - 1, sx = xx + tap % 3 - 1;
              if (sy < 0 || sy >= h || sx < 0 || sx >= w) continue;
              for (int i = 0; i < cin; ++i) {
                const double t = double{xf[((n * h + sy) * w + sx) * cin + i]} * w_h[(tap * 3 + o) * cin + i];
                want += t;
                mag += std::abs(t);
              }
            }
            const int64_t p = (n + 1) * hw + int64_t{y} * w + xx;
            ASSERT_NEAR(got[o * plane + p], want, 1e-5 * mag + 1e-6) << n << " " << y << " " << xx << " " << o;
          }
    // Images 0 and 3 of the output were not written.
    for (int o = 0; o < 3; ++o)
      for (int64_t p = 0; p < hw; ++p) {
        ASSERT_EQ(got[o * plane + p], 0.0f);
        ASSERT_EQ(got[o * plane + 3 * hw + p], 0.0f);
      }
  }
  DeviceArray<Bf16Bits> x(8);
  DeviceArray<float> f(27 * 456);
  EXPECT_EQ(VqNhwcConvOut3(AsBf16(x), f.get(), f.get(), 1, 1, 1, 456, f.get(), 1, 0), cudaErrorInvalidValue);
}

}  // namespace
}  // namespace argen::kernels
