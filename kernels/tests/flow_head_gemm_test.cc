// The flow head's fused GEMM and residual-norm kernels (kernels/flow_head_gemm.h,
// kernels/flow_head_kernels.h) against float64 host references on the same
// bf16 inputs: the published head's shapes (width 1536, token 64), the tiny
// checkpoint's (width 32, token 16), ragged ones (k and n not multiples of
// the 32-column tile, rows past one tile, 16- and 32-row tiles), both epilogues, run-to-run bitwise
// equality and the argument checks. Needs a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "kernels/flow_head_gemm.h"
#include "kernels/flow_head_kernels.h"
#include "kernels/tests/cuda_test_util.h"

namespace argen::kernels {
namespace {

using testing::DeviceArray;
using testing::FromBf16Bits;
using testing::RandomFloats;
using testing::ReferenceLinear;
using testing::ToBf16;

struct Shape {
  int rows, k, n;
};

class FlowGemmTest : public ::testing::TestWithParam<Shape> {};

TEST_P(FlowGemmTest, StoreF32MatchesTheHostAndRepeatsBitwise) {
  const Shape s = GetParam();
  std::mt19937 rng(s.rows * 131 + s.k * 7 + s.n);
  const std::vector<float> x = RandomFloats(rng, static_cast<size_t>(s.rows) * s.k);
  const std::vector<float> w = RandomFloats(rng, static_cast<size_t>(s.n) * s.k, 0.05f);
  const std::vector<float> bias = RandomFloats(rng, s.n, 0.3f);
  DeviceArray<uint16_t> dx(ToBf16(x)), dw(ToBf16(w));
  DeviceArray<float> db(bias), dy(static_cast<size_t>(s.rows) * s.n);
  dy.Poison();
  FlowGemmArgs a;
  a.x = reinterpret_cast<const __nv_bfloat16*>(dx.get());
  a.w = reinterpret_cast<const __nv_bfloat16*>(dw.get());
  a.rows = s.rows;
  a.k = s.k;
  a.n = s.n;
  a.bias = db.get();
  a.out_f32 = dy.get();
  ARGEN_CUDA_OK(FlowGemm(a, nullptr));
  ARGEN_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<float> got = dy.Download();
  std::vector<double> want, scale;
  ReferenceLinear(x, w, s.rows, s.k, s.n, &want, &scale);
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << "output " << i << " unwritten or not finite";
    const double err = std::abs(got[i] - (want[i] + bias[i % s.n]));
    worst = std::max(worst, err / (scale[i] + std::abs(bias[i % s.n]) + 1e-30));
  }
  // fp32 accumulation over k terms: a few units of 2^-24 times sqrt(k) of the terms' magnitude.
  EXPECT_LT(worst, 1e-5) << s.rows << " x " << s.k << " -> " << s.n;
  std::cout << s.rows << " x " << s.k << " -> " << s.n << ": worst error / sum |terms| " << worst << "\n";

  ARGEN_CUDA_OK(FlowGemm(a, nullptr));
  ARGEN_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<float> again = dy.Download();
  EXPECT_EQ(0, std::memcmp(got.data(), again.data(), got.size() * sizeof(float))) << "not bitwise repeatable";
}

TEST_P(FlowGemmTest, BiasSiluEpilogueRoundsToBf16) {
  const Shape s = GetParam();
  std::mt19937 rng(s.rows * 17 + s.k + s.n * 3);
  const std::vector<float> x = RandomFloats(rng, static_cast<size_t>(s.rows) * s.k);
  const std::vector<float> w = RandomFloats(rng, static_cast<size_t>(s.n) * s.k, 0.05f);
  const std::vector<float> bias = RandomFloats(rng, s.n, 0.3f);
  DeviceArray<uint16_t> dx(ToBf16(x)), dw(ToBf16(w)), dy(static_cast<size_t>(s.rows) * s.n);
  DeviceArray<float> db(bias);
  dy.Poison(0xff);  // NaN
  FlowGemmArgs a;
  a.x = reinterpret_cast<const __nv_bfloat16*>(dx.get());
  a.w = reinterpret_cast<const __nv_bfloat16*>(dw.get());
  a.rows = s.rows;
  a.k = s.k;
  a.n = s.n;
  a.bias = db.get();
  a.epilogue = FlowGemmEpilogue::kBiasSiluBf16;
  a.out_bf16 = reinterpret_cast<__nv_bfloat16*>(dy.get());
  ARGEN_CUDA_OK(FlowGemm(a, nullptr));
  ARGEN_CUDA_OK(cudaDeviceSynchronize());
  const std::vector<uint16_t> got = dy.Download();
  std::vector<double> want, scale;
  ReferenceLinear(x, w, s.rows, s.k, s.n, &want, &scale);
  for (size_t i = 0; i < got.size(); ++i) {
    const double z = want[i] + bias[i % s.n];
    const double silu = z / (1.0 + std::exp(-z));
    const float g = FromBf16Bits(got[i]);
    ASSERT_TRUE(std::isfinite(g)) << "output " << i;
    // One bf16 rounding (2^-8 relative) plus the accumulation's error carried through SiLU (slope <= 1.1).
    EXPECT_NEAR(g, silu, std::abs(silu) * 0.0079 + 1.1 * 1e-5 * (scale[i] + 1.0)) << "output " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, FlowGemmTest,
                         ::testing::Values(Shape{2, 1536, 1536},    // the published head at one image: fc1, fc2
                                           Shape{128, 1536, 1536},  // 64 images
                                           Shape{130, 1536, 64},    // the final linear, rows past four tiles
                                           Shape{37, 64, 1536},     // input_proj
                                           Shape{6, 16, 32},        // the tiny checkpoint's input_proj
                                           Shape{6, 32, 16},        // and its final linear
                                           Shape{33, 40, 50},       // k and n off the tile
                                           Shape{16, 1536, 1536},   // the most rows of the warp-per-column kernel
                                           Shape{17, 64, 1536},     // the fewest of the tiles (16-row ones)
                                           Shape{24, 1536, 1536},   // 16 images' fc1: two rows of 16-row tiles
                                           Shape{32, 1536, 64},     // the most rows of the 16-row tiles
                                           Shape{20, 40, 50},       // 16-row tiles, k and n off the tile
                                           Shape{24, 32, 16},       // k not a multiple of 64: 32-row tiles
                                           Shape{256, 1536, 96}),   // a full chunk of rows
                         [](const ::testing::TestParamInfo<Shape>& p) {
                           char name[64];
                           std::snprintf(name, sizeof(name), "r%d_k%d_n%d", p.param.rows, p.param.k, p.param.n);
                           return std::string(name);
                         });

TEST(FlowGemmArgsTest, RefusesShapesAndInputsItCannotRun) {
  EXPECT_TRUE(FlowGemmShapeSupported(1536, 1536));
  EXPECT_TRUE(FlowGemmShapeSupported(8, 1));
  EXPECT_FALSE(FlowGemmShapeSupported(12, 64));                 // k not a multiple of 8
  EXPECT_FALSE(FlowGemmShapeSupported(kFlowGemmMaxK + 8, 64));  // past shared memory
  EXPECT_FALSE(FlowGemmShapeSupported(64, 0));
  DeviceArray<uint16_t> x(64 * 8), w(64 * 8);
  DeviceArray<float> y(64 * 8);
  FlowGemmArgs a;
  a.x = reinterpret_cast<const __nv_bfloat16*>(x.get());
  a.w = reinterpret_cast<const __nv_bfloat16*>(w.get());
  a.rows = 8;
  a.k = 64;
  a.n = 8;
  a.out_f32 = y.get();
  ARGEN_CUDA_OK(FlowGemm(a, nullptr));
  FlowGemmArgs misaligned = a;
  misaligned.x = reinterpret_cast<const __nv_bfloat16*>(x.get()) + 1;
  EXPECT_EQ(FlowGemm(misaligned, nullptr), cudaErrorInvalidValue);
  FlowGemmArgs no_bias = a;
  no_bias.epilogue = FlowGemmEpilogue::kBiasSiluBf16;
  no_bias.out_bf16 = reinterpret_cast<__nv_bfloat16*>(w.get());
  EXPECT_EQ(FlowGemm(no_bias, nullptr), cudaErrorInvalidValue);
  FlowGemmArgs no_out = a;
  no_out.out_f32 = nullptr;
  EXPECT_EQ(FlowGemm(no_out, nullptr), cudaErrorInvalidValue);
  a.rows = 0;
  EXPECT_EQ(FlowGemm(a, nullptr), cudaSuccess);  // nothing to do
  ARGEN_CUDA_OK(cudaDeviceSynchronize());
}

// h += (mod_gate + bias) (y + y_bias), then bf16(LN(h) w + b) (1 + scale) + shift, against double.
TEST(FlowResidualNormTest, MatchesTheHost) {
  for (const int width : {1536, 3000}) {  // registers per thread, and the loop past 2048
    for (const bool affine : {true, false}) {
      for (const bool residual : {true, false}) {
        const int rows = 5;
        const int64_t stride = 5 * width;
        std::mt19937 rng(width + affine * 2 + residual);
        std::vector<float> h = RandomFloats(rng, static_cast<size_t>(rows) * width, 3.0f);
        for (int i = 0; i < width; ++i) h[i] += 40.0f;  // a row far from zero mean
        const std::vector<float> y = RandomFloats(rng, h.size());
        const std::vector<float> yb = RandomFloats(rng, width, 0.2f);
        const std::vector<float> mod = RandomFloats(rng, static_cast<size_t>(rows) * stride, 0.5f);
        const std::vector<float> mb = RandomFloats(rng, stride, 0.1f);
        const std::vector<float> lw = RandomFloats(rng, width, 1.0f), lb = RandomFloats(rng, width, 0.1f);
        DeviceArray<float> dh(h), dy(y), dyb(yb), dmod(mod), dmb(mb), dlw(lw), dlb(lb);
        DeviceArray<uint16_t> dhn(h.size());
        FlowResidualNormArgs a;
        a.h = dh.get();
        a.rows = rows;
        a.width = width;
        if (residual) {
          a.y = dy.get();
          a.y_bias = dyb.get();
        }
        a.mod = dmod.get();
        a.mod_bias = dmb.get();
        a.mod_stride = stride;
        a.gate_at = 2 * width;
        a.shift_at = 3 * width;
        a.scale_at = 4 * width;
        if (affine) {
          a.ln_weight = dlw.get();
          a.ln_bias = dlb.get();
        }
        a.hn = reinterpret_cast<__nv_bfloat16*>(dhn.get());
        ARGEN_CUDA_OK(FlowResidualNorm(a, nullptr));
        ARGEN_CUDA_OK(cudaDeviceSynchronize());
        const std::vector<float> got_h = dh.Download();
        const std::vector<uint16_t> got_hn = dhn.Download();
        for (int r = 0; r < rows; ++r) {
          std::vector<double> hr(width);
          for (int i = 0; i < width; ++i) {
            const size_t at = static_cast<size_t>(r) * width + i;
            const double gate = double{mod[r * stride + 2 * width + i]} + mb[2 * width + i];
            hr[i] = h[at] + (residual ? gate * (double{y[at]} + yb[i]) : 0.0);
            ASSERT_NEAR(got_h[at], hr[i], 1e-5 * (std::abs(hr[i]) + 1)) << "h row " << r << " at " << i;
          }
          double mean = 0, var = 0;
          for (double v : hr) mean += v;
          mean /= width;
          for (double v : hr) var += (v - mean) * (v - mean);
          const double inv = 1.0 / std::sqrt(var / width + 1e-6);
          for (int i = 0; i < width; ++i) {
            double n = (hr[i] - mean) * inv;
            if (affine) n = n * lw[i] + lb[i];
            const double scale = double{mod[r * stride + 4 * width + i]} + mb[4 * width + i];
            const double shift = double{mod[r * stride + 3 * width + i]} + mb[3 * width + i];
            const double want = n * (1 + scale) + shift;
            EXPECT_NEAR(FromBf16Bits(got_hn[static_cast<size_t>(r) * width + i]), want, std::abs(want) * 0.0079 + 1e-4)
                << "hn row " << r << " at " << i << (affine ? " affine" : "") << (residual ? " residual" : "");
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace argen::kernels
