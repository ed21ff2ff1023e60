// The decoder's building blocks against direct (naive, double-precision)
// implementations of their definitions, including the shapes the tiny golden
// never reaches (im2col in several bands, odd sizes, accumulation).
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "engine/parallel/thread_pool.h"
#include "engine/vq/conv2d.h"
#include "engine/vq/group_norm.h"
#include "engine/vq/pixels.h"
#include "engine/vq/spatial_attention.h"
#include "gtest/gtest.h"

namespace argen::vq {
namespace {

std::vector<float> Random(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

Conv2dWeights RandomConv(int32_t cin, int32_t cout, int32_t k, uint32_t seed) {
  Conv2dWeights c;
  c.cin = cin;
  c.cout = cout;
  c.kernel = k;
  c.weight = Random(static_cast<size_t>(cout) * cin * k * k, seed, 0.2f);
  c.bias = Random(cout, seed + 1);
  return c;
}

// Direct definition of a stride-1 conv with zero padding k/2.
std::vector<double> NaiveConv(const Conv2dWeights& c, const std::vector<float>& in, int32_t h, int32_t w) {
  const int32_t p = c.kernel / 2;
  std::vector<double> out(static_cast<size_t>(c.cout) * h * w);
  for (int32_t o = 0; o < c.cout; ++o)
    for (int32_t y = 0; y < h; ++y)
      for (int32_t x = 0; x < w; ++x) {
        double acc = c.bias[o];
        for (int32_t i = 0; i < c.cin; ++i)
          for (int32_t ky = 0; ky < c.kernel; ++ky)
            for (int32_t kx = 0; kx < c.kernel; ++kx) {
              const int32_t sy = y + ky - p, sx = x + kx - p;
              if (sy < 0 || sy >= h || sx < 0 || sx >= w) continue;
              acc += static_cast<double>(
                         c.weight[((static_cast<size_t>(o) * c.cin + i) * c.kernel + ky) * c.kernel + kx]) *
                     in[(static_cast<size_t>(i) * h + sy) * w + sx];
            }
        out[(static_cast<size_t>(o) * h + y) * w + x] = acc;
      }
  return out;
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol * (1.0 + std::abs(want[i]))) << "at " << i;
}

TEST(Conv2dTest, ThreeByThreeInOneBandMatchesDefinition) {
  const int32_t h = 7, w = 5;
  Conv2dWeights c = RandomConv(6, 4, 3, 11);
  std::vector<float> in = Random(6 * h * w, 12);
  std::vector<float> col(Conv2dScratchFloats(c, h, w, size_t{1} << 20));
  std::vector<float> out(4 * h * w, std::numeric_limits<float>::quiet_NaN());  // must be fully overwritten
  Conv2d(c, in.data(), h, w, out.data(), false, col.data(), col.size());
  ExpectNear(out, NaiveConv(c, in, h, w), 1e-5);
}

TEST(Conv2dTest, ThreeByThreeInSeveralBandsMatchesDefinition) {
  const int32_t h = 11, w = 6;  // band of 3 rows: bands 3,3,3,2
  Conv2dWeights c = RandomConv(5, 7, 3, 21);
  std::vector<float> in = Random(5 * h * w, 22);
  const size_t per_row = 5 * 9 * w;
  ASSERT_EQ(Conv2dScratchFloats(c, h, w, 3 * per_row + 1), 3 * per_row);
  std::vector<float> col(3 * per_row);
  std::vector<float> out(7 * h * w);
  Conv2d(c, in.data(), h, w, out.data(), false, col.data(), col.size());
  ExpectNear(out, NaiveConv(c, in, h, w), 1e-5);
}

TEST(Conv2dTest, OneByOneAccumulatesOntoOutput) {
  const int32_t h = 3, w = 4;
  Conv2dWeights c = RandomConv(8, 5, 1, 31);
  EXPECT_EQ(Conv2dScratchFloats(c, h, w, 1), 0u);
  std::vector<float> in = Random(8 * h * w, 32);
  std::vector<float> out = Random(5 * h * w, 33);
  const std::vector<float> before = out;
  Conv2d(c, in.data(), h, w, out.data(), /*accumulate=*/true, nullptr, 0);
  std::vector<double> want = NaiveConv(c, in, h, w);
  for (size_t i = 0; i < want.size(); ++i) want[i] += before[i];
  ExpectNear(out, want, 1e-5);
}

TEST(GroupNormTest, MatchesDefinitionWithAndWithoutSwish) {
  const int32_t channels = 8, groups = 4;
  const size_t hw = 15;
  GroupNormWeights n;
  n.channels = channels;
  n.gamma = Random(channels, 41);
  n.beta = Random(channels, 42);
  std::vector<float> in = Random(channels * hw, 43, 3.0f);
  for (float& x : in) x += 5.0f;  // a large mean: the variance must not cancel
  for (bool swish : {false, true}) {
    std::vector<float> out(in.size());
    GroupNorm(n, groups, in.data(), hw, out.data(), swish);
    std::vector<double> want(in.size());
    const size_t per = channels / groups * hw;
    for (int32_t g = 0; g < groups; ++g) {
      double mean = 0, var = 0;
      for (size_t i = 0; i < per; ++i) mean += in[g * per + i];
      mean /= per;
      for (size_t i = 0; i < per; ++i) var += (in[g * per + i] - mean) * (in[g * per + i] - mean);
      var /= per;
      for (size_t i = 0; i < per; ++i) {
        const int32_t c = static_cast<int32_t>((g * per + i) / hw);
        double y = (in[g * per + i] - mean) / std::sqrt(var + 1e-6) * n.gamma[c] + n.beta[c];
        if (swish) y = y / (1.0 + std::exp(-y));
        want[g * per + i] = y;
      }
    }
    ExpectNear(out, want, 1e-5);
  }
}

TEST(SpatialAttentionTest, MatchesDefinition) {
  const int32_t c = 6, n = 10;
  std::vector<float> q = Random(c * n, 51), k = Random(c * n, 52), v = Random(c * n, 53);
  std::vector<float> scores(n * n), out(c * n);
  SpatialAttention(q.data(), k.data(), v.data(), c, n, scores.data(), out.data());
  std::vector<double> want(c * n, 0.0);
  for (int32_t i = 0; i < n; ++i) {
    std::vector<double> s(n);
    double mx = -1e300, sum = 0;
    for (int32_t j = 0; j < n; ++j) {
      double d = 0;
      for (int32_t ch = 0; ch < c; ++ch) d += static_cast<double>(q[ch * n + i]) * k[ch * n + j];
      s[j] = d / std::sqrt(static_cast<double>(c));
      mx = std::max(mx, s[j]);
    }
    for (double& x : s) sum += (x = std::exp(x - mx));
    for (int32_t ch = 0; ch < c; ++ch)
      for (int32_t j = 0; j < n; ++j) want[ch * n + i] += s[j] / sum * v[ch * n + j];
  }
  ExpectNear(out, want, 1e-5);
}

TEST(PixelsTest, UpsampleNearestRepeatsEachValueTwice) {
  const std::vector<float> in = {1, 2, 3, 4,  5,  6,  // channel 0: 2 x 3
                                 7, 8, 9, 10, 11, 12};
  std::vector<float> out(2 * 4 * 6);
  UpsampleNearest2x(in.data(), 2, 2, 3, out.data());
  for (int32_t c = 0; c < 2; ++c)
    for (int32_t y = 0; y < 4; ++y)
      for (int32_t x = 0; x < 6; ++x) EXPECT_EQ(out[(c * 4 + y) * 6 + x], in[(c * 2 + y / 2) * 3 + x / 2]);
}

TEST(PixelsTest, Rgb8FollowsTheOfficialClipAndTruncation) {
  // One pixel per case, channels (r, g, b); CHW with h = 1, w = 4.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> r = {-1.0f, 1.0f, -3.0f, nan};
  const std::vector<float> g = {0.0f, 5.0f, 2.0f / 255.0f - 1.0f + 1e-6f, 0.999f};
  const std::vector<float> b = {-0.5f, 0.00392f, 0.5f, -0.99999f};
  std::vector<float> chw;
  for (const auto* plane : {&r, &g, &b}) chw.insert(chw.end(), plane->begin(), plane->end());
  std::vector<uint8_t> rgb(12);
  ChwToRgb8(chw.data(), 1, 4, rgb.data());
  auto expect = [](float x) {  // numpy: clip((x+1)/2*255, 0, 255) in float32, then truncation
    float v = (x + 1.0f) / 2.0f * 255.0f;
    v = std::min(std::max(v, 0.0f), 255.0f);
    return static_cast<int>(v);
  };
  for (int32_t p = 0; p < 4; ++p) {
    if (p != 3) {
      EXPECT_EQ(rgb[3 * p + 0], expect(r[p])) << p;
    }
    EXPECT_EQ(rgb[3 * p + 1], expect(g[p])) << p;
    EXPECT_EQ(rgb[3 * p + 2], expect(b[p])) << p;
  }
  EXPECT_EQ(rgb[0], 0);
  EXPECT_EQ(rgb[1], 127);  // 127.5 truncates
  EXPECT_EQ(rgb[3], 255);
  EXPECT_EQ(rgb[6], 0);
  EXPECT_EQ(rgb[9], 0);     // NaN -> 0
  EXPECT_EQ(rgb[10], 254);  // 254.87 truncates
}

// The pooled paths give the same bits as the inline ones (each output element
// is computed by one thread in the same order). The pool itself is tested in
// engine/parallel/tests/thread_pool_test.cc.
TEST(PooledOpsTest, PooledOpsEqualInlineOps) {
  parallel::ThreadPool pool(3);
  const int32_t h = 9, w = 7;
  Conv2dWeights c = RandomConv(10, 6, 3, 61);
  std::vector<float> in = Random(10 * h * w, 62);
  std::vector<float> col(Conv2dScratchFloats(c, h, w, 2 * 10 * 9 * w));
  std::vector<float> a(6 * h * w), b(6 * h * w);
  Conv2d(c, in.data(), h, w, a.data(), false, col.data(), col.size(), nullptr);
  Conv2d(c, in.data(), h, w, b.data(), false, col.data(), col.size(), &pool);
  EXPECT_EQ(a, b);

  GroupNormWeights n;
  n.channels = 10;
  n.gamma = Random(10, 63);
  n.beta = Random(10, 64);
  std::vector<float> ga(in.size()), gb(in.size());
  GroupNorm(n, 5, in.data(), h * w, ga.data(), true, nullptr);
  GroupNorm(n, 5, in.data(), h * w, gb.data(), true, &pool);
  EXPECT_EQ(ga, gb);

  std::vector<float> ua(10 * 4 * h * w), ub(ua.size());
  UpsampleNearest2x(in.data(), 10, h, w, ua.data(), nullptr);
  UpsampleNearest2x(in.data(), 10, h, w, ub.data(), &pool);
  EXPECT_EQ(ua, ub);

  const int32_t na = h * w;
  std::vector<float> scores(na * na), oa(10 * na), ob(10 * na);
  SpatialAttention(in.data(), in.data(), in.data(), 10, na, scores.data(), oa.data(), nullptr);
  SpatialAttention(in.data(), in.data(), in.data(), 10, na, scores.data(), ob.data(), &pool);
  EXPECT_EQ(oa, ob);

  std::vector<uint8_t> ra(3 * h * w), rb(3 * h * w);
  ChwToRgb8(in.data(), h, w, ra.data(), nullptr);
  ChwToRgb8(in.data(), h, w, rb.data(), &pool);
  EXPECT_EQ(ra, rb);
}

}  // namespace
}  // namespace argen::vq
