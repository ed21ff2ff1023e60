// CudnnConvs (the bf16 path's 3x3 convolutions) against a float64 host
// convolution of the same bf16 inputs and filters: plain (beta 0) and
// accumulating into the output (beta 1, the residual), every planned batch,
// benchmarked and heuristic algorithm choice; unplanned batches are errors.
// Needs a GPU (label gpu).
#include "engine/vq_cuda/cudnn_convs.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <random>
#include <vector>

#include "engine/vq_cuda/vq_program.h"
#include "gtest/gtest.h"

namespace argen::vq {
namespace {

struct DeviceMem {
  void* p = nullptr;
  explicit DeviceMem(size_t bytes) {
    if (cudaMalloc(&p, bytes) != cudaSuccess) p = nullptr;
  }
  ~DeviceMem() { cudaFree(p); }
};

std::vector<uint16_t> RandomBf16(std::mt19937& rng, size_t n, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<uint16_t> v(n);
  for (auto& x : v) x = FloatToBf16Bits(d(rng));
  return v;
}

// NHWC x [n][h][w][cin], KRSC w [cout][3][3][cin] -> y [n][h][w][cout], in double.
std::vector<double> HostConv(const std::vector<uint16_t>& x, const std::vector<uint16_t>& w, const CudnnConvShape& s,
                             int n, std::vector<double>* magnitude) {
  std::vector<double> y(static_cast<size_t>(n) * s.h * s.w * s.cout, 0.0);
  magnitude->assign(y.size(), 0.0);
  for (int img = 0; img < n; ++img)
    for (int yy = 0; yy < s.h; ++yy)
      for (int xx = 0; xx < s.w; ++xx)
        for (int o = 0; o < s.cout; ++o) {
          double acc = 0, mag = 0;
          for (int tap = 0; tap < 9; ++tap) {
            const int sy = yy + tap / 3 - 1, sx = xx + tap % 3 - 1;
            if (sy < 0 || sy >= s.h || sx < 0 || sx >= s.w) continue;
            for (int i = 0; i < s.cin; ++i) {
              const double t =
                  double{Bf16BitsToFloat(x[((static_cast<size_t>(img) * s.h + sy) * s.w + sx) * s.cin + i])} *
                  Bf16BitsToFloat(w[(static_cast<size_t>(o) * 9 + tap) * s.cin + i]);
              acc += t;
              mag += std::abs(t);
            }
          }
          const size_t at = ((static_cast<size_t>(img) * s.h + yy) * s.w + xx) * s.cout + o;
          y[at] = acc;
          (*magnitude)[at] = mag;
        }
  return y;
}

class CudnnConvsTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    int n = 0;
    ASSERT_EQ(cudaGetDeviceCount(&n), cudaSuccess) << "no CUDA device: this test is labelled gpu";
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
  }
  void TearDown() override {
    if (stream_) cudaStreamDestroy(stream_);
  }
  cudaStream_t stream_ = nullptr;
};

TEST_P(CudnnConvsTest, MatchesFloat64WithAndWithoutAccumulation) {
  const bool benchmark = GetParam();
  const std::vector<CudnnConvShape> shapes = {{16, 24, 5, 7}, {32, 32, 9, 9}, {64, 8, 4, 4}};
  const std::vector<int32_t> batches = {1, 3};
  std::mt19937 rng(99);
  std::vector<std::vector<uint16_t>> w_host;
  std::vector<std::unique_ptr<DeviceMem>> w_dev;
  std::vector<const void*> filters;
  size_t most = 0;
  for (const CudnnConvShape& s : shapes) {
    w_host.push_back(RandomBf16(rng, static_cast<size_t>(s.cout) * 9 * s.cin, 0.2f));
    w_dev.push_back(std::make_unique<DeviceMem>(w_host.back().size() * 2));
    ASSERT_EQ(cudaMemcpy(w_dev.back()->p, w_host.back().data(), w_host.back().size() * 2, cudaMemcpyHostToDevice),
              cudaSuccess);
    filters.push_back(w_dev.back()->p);
    most = std::max(most, static_cast<size_t>(3) * s.h * s.w * std::max(s.cin, s.cout));
  }
  DeviceMem x(most * 2), y(most * 2), ws(size_t{64} << 20);
  ASSERT_EQ(cudaMemset(x.p, 0, most * 2), cudaSuccess);
  ASSERT_EQ(cudaMemset(y.p, 0, most * 2), cudaSuccess);
  auto convs = CudnnConvs::Create(stream_);
  ASSERT_TRUE(convs.ok()) << convs.status();
  absl::Status plan = (*convs)->Plan(shapes, filters, batches, benchmark, x.p, y.p, ws.p, size_t{64} << 20);
  ASSERT_TRUE(plan.ok()) << plan;
  std::cout << (*convs)->Describe() << "\n";
  ASSERT_LE((*convs)->workspace_bytes(), size_t{64} << 20);

  for (size_t si = 0; si < shapes.size(); ++si) {
    const CudnnConvShape& s = shapes[si];
    for (int32_t n : batches) {
      SCOPED_TRACE(::testing::Message() << "shape " << si << " batch " << n);
      const auto xin = RandomBf16(rng, static_cast<size_t>(n) * s.h * s.w * s.cin, 1.0f);
      const auto y0 = RandomBf16(rng, static_cast<size_t>(n) * s.h * s.w * s.cout, 1.0f);
      std::vector<double> mag;
      const std::vector<double> want = HostConv(xin, w_host[si], s, n, &mag);
      for (float beta : {0.0f, 1.0f}) {
        ASSERT_EQ(cudaMemcpy(x.p, xin.data(), xin.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
        ASSERT_EQ(cudaMemcpy(y.p, y0.data(), y0.size() * 2, cudaMemcpyHostToDevice), cudaSuccess);
        absl::Status st =
            (*convs)->Forward(static_cast<int32_t>(si), n, x.p, filters[si], y.p, beta, ws.p, size_t{64} << 20);
        ASSERT_TRUE(st.ok()) << st;
        ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
        std::vector<uint16_t> got(y0.size());
        ASSERT_EQ(cudaMemcpy(got.data(), y.p, got.size() * 2, cudaMemcpyDeviceToHost), cudaSuccess);
        for (size_t i = 0; i < got.size(); ++i) {
          const double expect = want[i] + beta * Bf16BitsToFloat(y0[i]);
          const double g = Bf16BitsToFloat(got[i]);
          // bf16 output rounding plus fp32 accumulation.
          ASSERT_LE(std::abs(g - expect), std::ldexp(1.0, -8) * std::abs(expect) + 1e-5 * (mag[i] + 1.0))
              << "beta " << beta << " element " << i << ": got " << g << " want " << expect;
        }
      }
    }
  }
  absl::Status bad = (*convs)->Forward(0, 2, x.p, filters[0], y.p, 0.0f, ws.p, size_t{64} << 20);
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("not planned"), std::string::npos) << bad;
}

INSTANTIATE_TEST_SUITE_P(AlgorithmChoice, CudnnConvsTest, ::testing::Values(true, false),
                         [](const auto& info) { return info.param ? "Benchmarked" : "Heuristic"; });

}  // namespace
}  // namespace argen::vq
