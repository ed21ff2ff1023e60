// The decoder's skinny Linear (kernels/skinny_linear.h) against a float64 host
// reference on the same bf16 inputs: 1-4 rows, the published models' widths
// (7B's 4096 and 11008, NextStep's 5120 and 13824, the flow head's 1536),
// ragged ones (a chunk count that is not a multiple of the warp's sweep, an
// odd column count, one column), beta 0 and 1 (the residual add), every K
// split the kernel can pick, run-to-run bitwise equality, and the argument
// checks. Needs a GPU.
#include "kernels/skinny_linear.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <set>
#include <vector>

#include "kernels/tests/cuda_test_util.h"

namespace argen::kernels {
namespace {

using testing::DeviceArray;
using testing::RandomFloats;
using testing::ReferenceLinear;
using testing::ToBf16;

struct Shape {
  int rows, in, out;
};

class SkinnyLinearTest : public ::testing::TestWithParam<Shape> {};

TEST_P(SkinnyLinearTest, MatchesTheHostWithAndWithoutResidualAndRepeatsBitwise) {
  const Shape s = GetParam();
  std::mt19937 rng(s.rows * 131 + s.in * 7 + s.out);
  const std::vector<float> x = RandomFloats(rng, static_cast<size_t>(s.rows) * s.in);
  const std::vector<float> w = RandomFloats(rng, static_cast<size_t>(s.out) * s.in, 0.05f);
  const std::vector<float> y0 = RandomFloats(rng, static_cast<size_t>(s.rows) * s.out);
  std::vector<double> ref, scale;
  ReferenceLinear(x, w, s.rows, s.in, s.out, &ref, &scale);
  DeviceArray<uint16_t> dx(ToBf16(x)), dw(ToBf16(w));
  DeviceArray<float> dy(y0.size());
  const auto* xp = reinterpret_cast<const __nv_bfloat16*>(dx.get());
  const auto* wp = reinterpret_cast<const __nv_bfloat16*>(dw.get());
  ASSERT_TRUE(SkinnyLinearSupported(xp, wp, s.rows, s.in, s.out));
  for (const float beta : {0.f, 1.f}) {
    dy.Upload(y0);
    ARGEN_CUDA_OK(SkinnyLinearBf16(xp, wp, s.rows, s.in, s.out, dy.get(), beta, nullptr));
    ARGEN_CUDA_OK(cudaDeviceSynchronize());
    const std::vector<float> got = dy.Download();
    double worst = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const double want = ref[i] + (beta != 0.f ? double{y0[i]} : 0.0);
      ASSERT_TRUE(std::isfinite(got[i])) << i;
      worst = std::max(worst, std::abs(got[i] - want) / (scale[i] + std::abs(y0[i]) + 1e-30));
    }
    std::printf("%d x %d -> %d (split %d), beta %g: worst error / sum |terms| %g\n", s.rows, s.in, s.out,
                SkinnyLinearSplit(s.rows, s.in, s.out), beta, worst);
    EXPECT_LT(worst, 1e-5) << s.rows << " x " << s.in << " -> " << s.out << ", beta " << beta;
    // The same call again: bitwise the same (the parts are added in a fixed order).
    dy.Upload(y0);
    ARGEN_CUDA_OK(SkinnyLinearBf16(xp, wp, s.rows, s.in, s.out, dy.get(), beta, nullptr));
    ARGEN_CUDA_OK(cudaDeviceSynchronize());
    EXPECT_EQ(dy.Download(), got) << "beta " << beta;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, SkinnyLinearTest,
                         ::testing::Values(Shape{1, 8, 1}, Shape{2, 64, 3}, Shape{2, 1536, 1536}, Shape{3, 4096, 257},
                                           Shape{4, 4096, 4096}, Shape{2, 11008, 96}, Shape{2, 13824, 640},
                                           Shape{4, 1544, 37}, Shape{1, 296, 5121}, Shape{2, 5120, 1000}));

// The split the host picks is one of the kernel's and every one of them is
// exercised by the shapes above or here (a narrow output over a long K
// takes the widest split).
TEST(SkinnyLinearSplitTest, PicksAKernelSplitAndWidensNarrowOutputs) {
  std::set<int> seen;
  for (int rows = 1; rows <= kSkinnyLinearMaxRows; ++rows) {
    for (const auto& [in, out] : std::vector<std::pair<int, int>>{
             {8, 1}, {4096, 12288}, {4096, 4096}, {13824, 64}, {11008, 4096}, {1536, 58368}}) {
      const int s = SkinnyLinearSplit(rows, in, out);
      EXPECT_TRUE(s == 1 || s == 2 || s == 4 || s == 8) << s;
      seen.insert(s);
    }
  }
  EXPECT_EQ(SkinnyLinearSplit(2, 8, 1), 1) << "one chunk a column: no split";
  EXPECT_GT(SkinnyLinearSplit(2, 13824, 64), 1) << "64 columns cannot fill the card without a split";
  EXPECT_GE(seen.size(), 2u);
}

TEST(SkinnyLinearArgsTest, RefusesWhatItCannotRun) {
  DeviceArray<uint16_t> x(4 * 64 + 8), w(64 * 8 + 8);
  DeviceArray<float> y(5 * 8);
  const auto* xp = reinterpret_cast<const __nv_bfloat16*>(x.get());
  const auto* wp = reinterpret_cast<const __nv_bfloat16*>(w.get());
  EXPECT_TRUE(SkinnyLinearSupported(xp, wp, 4, 64, 8));
  EXPECT_FALSE(SkinnyLinearSupported(xp, wp, 5, 64, 8)) << "more rows than the kernel takes";
  EXPECT_FALSE(SkinnyLinearSupported(xp, wp, 0, 64, 8));
  EXPECT_FALSE(SkinnyLinearSupported(xp, wp, 2, 60, 8)) << "in not a multiple of 8";
  EXPECT_FALSE(SkinnyLinearSupported(xp, wp, 2, 64, 0));
  EXPECT_FALSE(SkinnyLinearSupported(xp + 1, wp, 2, 64, 8)) << "x not 16-byte aligned";
  EXPECT_FALSE(SkinnyLinearSupported(xp, wp + 4, 2, 64, 8)) << "w not 16-byte aligned";
  EXPECT_FALSE(SkinnyLinearSupported(nullptr, wp, 2, 64, 8));
  EXPECT_EQ(SkinnyLinearBf16(xp, wp, 5, 64, 8, y.get(), 0.f, nullptr), cudaErrorInvalidValue);
  EXPECT_EQ(SkinnyLinearBf16(xp, wp, 2, 64, 8, nullptr, 0.f, nullptr), cudaErrorInvalidValue);
  cudaGetLastError();
}

}  // namespace
}  // namespace argen::kernels
