// The skinny decode GEMM against a float64 host product of the same bf16
// inputs: every supported row count class (1..32 rows, m-tiles 1..2, partial
// tiles), out not a multiple of the 64-column block, K of one stage up to
// longer than the pipeline, K split or not, beta 0
// (y not read: poisoned) and 1 (residual add); and split results equal to the
// unsplit ones within fp32 reordering.
#include "kernels/skinny_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <tuple>
#include <vector>

#include "kernels/tests/cuda_test_util.h"

namespace argen::kernels {
namespace {

using testing::Bf16Bits;
using testing::DeviceArray;
using testing::FromBf16Bits;
using testing::RandomFloats;
using testing::ToBf16;

struct Case {
  int rows, in, out, splits;
  float beta;
};

class SkinnyGemmTest : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(testing::RequireDevice()); }
};

TEST_P(SkinnyGemmTest, MatchesFloat64Product) {
  const Case c = GetParam();
  ASSERT_TRUE(SkinnyGemmSupported(c.rows, c.in, c.out));
  std::mt19937 rng(c.rows * 7919 + c.in * 31 + c.out + c.splits);
  const std::vector<Bf16Bits> x = ToBf16(RandomFloats(rng, size_t(c.rows) * c.in));
  const std::vector<Bf16Bits> w = ToBf16(RandomFloats(rng, size_t(c.out) * c.in, 0.05f));
  const std::vector<float> y0 = RandomFloats(rng, size_t(c.rows) * c.out);
  DeviceArray<Bf16Bits> xd(x), wd(w);
  DeviceArray<float> yd(size_t(c.rows) * c.out);
  if (c.beta != 0.f)
    yd.Upload(y0);
  else
    yd.Poison(0xff);  // NaN bytes: beta 0 must not read y
  DeviceArray<float> ws(std::max<size_t>(1, SkinnyWorkspaceBytes(c.rows, c.out, c.splits) / sizeof(float)));
  SkinnyGemmArgs a;
  a.x = reinterpret_cast<const __nv_bfloat16*>(xd.get());
  a.w = reinterpret_cast<const __nv_bfloat16*>(wd.get());
  a.y = yd.get();
  a.rows = c.rows;
  a.in = c.in;
  a.out = c.out;
  a.beta = c.beta;
  a.splits = c.splits;
  a.partials = c.splits > 1 ? ws.get() : nullptr;
  ARGEN_CUDA_OK(SkinnyGemm(a, nullptr));
  ARGEN_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<float> y = yd.Download();
  double worst = 0;
  for (int r = 0; r < c.rows; ++r) {
    for (int n = 0; n < c.out; ++n) {
      double want = c.beta * double(y0[size_t(r) * c.out + n]), mag = std::fabs(want);
      for (int k = 0; k < c.in; ++k) {
        const double p = double(FromBf16Bits(x[size_t(r) * c.in + k])) * FromBf16Bits(w[size_t(n) * c.in + k]);
        want += p;
        mag += std::fabs(p);
      }
      const double got = y[size_t(r) * c.out + n];
      ASSERT_TRUE(std::isfinite(got)) << "row " << r << " col " << n;
      // fp32 accumulation of exact bf16 products: error ~ K * 2^-24 * sum |terms|.
      const double err = std::fabs(got - want) / std::max(mag, 1e-30);
      worst = std::max(worst, err);
      ASSERT_LT(err, 1e-5) << "row " << r << " col " << n << " got " << got << " want " << want;
    }
  }
  RecordProperty("worst_relative_error", std::to_string(worst));
}

INSTANTIATE_TEST_SUITE_P(Shapes, SkinnyGemmTest,
                         ::testing::Values(Case{1, 64, 8, 1, 0.f}, Case{2, 4096, 136, 1, 0.f},
                                           Case{2, 4096, 136, 7, 1.f}, Case{7, 192, 264, 1, 1.f},
                                           Case{16, 512, 128, 2, 0.f}, Case{17, 1024, 520, 3, 1.f},
                                           Case{32, 2048, 384, 5, 0.f}, Case{24, 320, 1032, 1, 1.f},
                                           Case{32, 11008, 256, 9, 1.f}, Case{31, 4096, 1288, 4, 1.f},
                                           Case{3, 448, 72, 1, 0.f}));

TEST(SkinnyGemmRules, ShapesSplitsAndErrors) {
  EXPECT_TRUE(SkinnyGemmSupported(1, 64, 8));
  EXPECT_TRUE(SkinnyGemmSupported(32, 4096, 12288));
  EXPECT_FALSE(SkinnyGemmSupported(33, 4096, 4096));
  EXPECT_FALSE(SkinnyGemmSupported(0, 4096, 4096));
  EXPECT_FALSE(SkinnyGemmSupported(2, 4000, 4096));  // in % 64
  EXPECT_FALSE(SkinnyGemmSupported(2, 4096, 4100));  // out % 8
  // Janus-Pro-7B o_proj (64 column blocks) splits K to fill 132 SMs twice; a wide
  // GEMM (gate_up, 344 blocks) does not; the workspace bound is respected.
  EXPECT_EQ(ChooseSkinnySplits(2, 4096, 4096, 132, size_t{16} << 20), 5);
  EXPECT_EQ(ChooseSkinnySplits(2, 4096, 22016, 132, size_t{16} << 20), 1);
  const size_t bound = size_t{3} << 19;
  const int s = ChooseSkinnySplits(32, 4096, 4096, 132, bound);
  EXPECT_GE(s, 1);
  EXPECT_LE(SkinnyWorkspaceBytes(32, 4096, s), bound);
  EXPECT_GT(SkinnyWorkspaceBytes(32, 4096, s + 1), bound);
  EXPECT_EQ(ChooseSkinnySplits(2, 64, 8, 132, size_t{16} << 20), 1);  // one stage: nothing to split
  SkinnyGemmArgs a;
  a.rows = 2;
  a.in = 64;
  a.out = 8;  // supported, but no pointers
  EXPECT_EQ(SkinnyGemm(a, nullptr), cudaErrorInvalidValue);  // null pointers
}

}  // namespace
}  // namespace argen::kernels
