// engine/cuda/gemm.h against a float64 host reference on random bf16
// operands, beta 0 and 1 (the residual add), rows 1, 2, 4, 7 and 206 at a
// tiny and a wide shape (cuBLAS; the skinny kernel, the A/B option, at 1-2
// rows of the wide ones); the skinny kernel and cuBLAS agree at 1-4 rows; repeated calls repeat bit for bit, and a
// Linear captured in a CUDA graph replays the eager result exactly. The fp8 path (weight_dtype fp8): the device
// quantizes rows to exactly the host's e4m3 codes and scales (kernels/kv_fp8.h), and the cuBLASLt product matches a
// float64 product of the dequantized codes, with the residual, an outlier row and an all-zero row, and replays from a
// graph. Needs a GPU.
#include "engine/cuda/gemm.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "engine/cuda/device_buffer.h"
#include "engine/cuda/graph_capture.h"
#include "kernels/fp8_linear.h"
#include "kernels/kv_fp8.h"

namespace argen::cuda {
namespace {

using bf16 = __nv_bfloat16;

struct Lcg {  // deterministic uniform values in [-1, 1)
  uint64_t s;
  float Next() {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<float>((s >> 40) & 0xFFFFFF) / 8388608.0f - 1.0f;
  }
};

struct Case {
  int rows, in, out;
};

class GemmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) GTEST_SKIP() << "no GPU";
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_TRUE(gemm_.Init(stream_).ok());
  }
  void TearDown() override {
    if (stream_ == nullptr) return;
    cudaStreamSynchronize(stream_);
    gemm_.Reset();
    cudaStreamDestroy(stream_);
  }
  // Captures run() into a CUDA graph (as the engine's decode step is) and
  // launches it once on stream_, to completion.
  void LaunchCaptured(const std::function<absl::Status()>& run) {
    absl::StatusOr<cudaGraphExec_t> exec = CaptureGraph(stream_, run, "gemm test graph");
    ASSERT_TRUE(exec.ok()) << exec.status();
    EXPECT_EQ(cudaGraphLaunch(*exec, stream_), cudaSuccess);
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    cudaGraphExecDestroy(*exec);
  }
  cudaStream_t stream_ = nullptr;
  Gemm gemm_;
};

template <typename T>
DeviceBuffer Upload(const std::vector<T>& h) {
  DeviceBuffer b = *DeviceBuffer::Allocate(h.size() * sizeof(T), "operand");
  EXPECT_EQ(cudaMemcpy(b.as(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
  return b;
}

TEST_F(GemmTest, MatchesFloat64WithAndWithoutTheResidual) {
  for (const Case c : {Case{1, 64, 96}, Case{7, 64, 96}, Case{206, 64, 96}, Case{1, 4096, 11008}, Case{2, 4096, 1000},
                       Case{4, 1544, 37}, Case{7, 1536, 512}, Case{206, 1536, 512}}) {
    SCOPED_TRACE(testing::Message() << c.rows << " x " << c.in << " -> " << c.out);
    gemm_.set_skinny(c.rows <= 4 && c.in >= 4096);  // the skinny kernel at 1-4 rows of the wide shapes
    Lcg g{static_cast<uint64_t>(c.rows * 131 + c.in)};
    std::vector<bf16> x(static_cast<size_t>(c.rows) * c.in), w(static_cast<size_t>(c.out) * c.in);
    std::vector<float> y0(static_cast<size_t>(c.rows) * c.out);
    for (auto& v : x) v = __float2bfloat16(g.Next());
    for (auto& v : w) v = __float2bfloat16(g.Next());
    for (auto& v : y0) v = 4.0f * g.Next();
    DeviceBuffer xd = Upload(x), wd = Upload(w), yd = Upload(y0);
    for (float beta : {0.f, 1.f}) {
      ASSERT_EQ(cudaMemcpy(yd.as(), y0.data(), y0.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_TRUE(gemm_.Linear(xd.as<bf16>(), wd.as<bf16>(), c.rows, c.in, c.out, yd.as<float>(), beta, "t").ok());
      std::vector<float> y(y0.size());
      ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(y.data(), yd.as(), y.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      double worst = 0;
      for (int r = 0; r < c.rows; ++r)
        for (int o = 0; o < c.out; ++o) {
          double want = beta * y0[static_cast<size_t>(r) * c.out + o];
          for (int i = 0; i < c.in; ++i)
            want += static_cast<double>(__bfloat162float(x[static_cast<size_t>(r) * c.in + i])) *
                    __bfloat162float(w[static_cast<size_t>(o) * c.in + i]);
          worst = std::max(worst, std::fabs(want - y[static_cast<size_t>(r) * c.out + o]) /
                                      std::max(1.0, std::sqrt(static_cast<double>(c.in))));
        }
      EXPECT_LT(worst, 1e-4) << "beta " << beta;
    }
  }
}

// At 1-4 rows the engine's default (the skinny kernel) and cuBLAS give the
// same product up to fp32 summation order.
TEST_F(GemmTest, SkinnyKernelAgreesWithCublasAtFewRows) {
  for (int rows = 1; rows <= 4; ++rows) {
    const Case c{rows, 5120, 640};
    SCOPED_TRACE(testing::Message() << c.rows << " x " << c.in << " -> " << c.out);
    Lcg g{static_cast<uint64_t>(rows * 7 + 1)};
    std::vector<bf16> x(static_cast<size_t>(c.rows) * c.in), w(static_cast<size_t>(c.out) * c.in);
    for (auto& v : x) v = __float2bfloat16(g.Next());
    for (auto& v : w) v = __float2bfloat16(g.Next());
    DeviceBuffer xd = Upload(x), wd = Upload(w);
    DeviceBuffer yd = *DeviceBuffer::Allocate(static_cast<size_t>(c.rows) * c.out * 4, "y");
    std::vector<float> y[2];
    for (int skinny = 0; skinny < 2; ++skinny) {
      gemm_.set_skinny(skinny == 1);
      ASSERT_TRUE(gemm_.Linear(xd.as<bf16>(), wd.as<bf16>(), c.rows, c.in, c.out, yd.as<float>(), 0.f, "t").ok());
      y[skinny].resize(static_cast<size_t>(c.rows) * c.out);
      ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(y[skinny].data(), yd.as(), y[skinny].size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    }
    double worst = 0;
    for (size_t i = 0; i < y[0].size(); ++i) worst = std::max(worst, std::fabs(double{y[0][i]} - y[1][i]));
    EXPECT_LT(worst / std::sqrt(static_cast<double>(c.in)), 1e-4);
  }
  gemm_.set_skinny(false);
}

TEST_F(GemmTest, RepeatsBitForBitAndReplaysFromAGraph) {
  // 3 rows on the skinny kernel; 206 on cuBLAS.
  for (const Case c : {Case{3, 1536, 512}, Case{206, 1536, 512}}) {
    SCOPED_TRACE(testing::Message() << c.rows << " rows");
    gemm_.set_skinny(c.rows == 3);
    Lcg g{3};
    std::vector<bf16> x(static_cast<size_t>(c.rows) * c.in), w(static_cast<size_t>(c.out) * c.in);
    for (auto& v : x) v = __float2bfloat16(g.Next());
    for (auto& v : w) v = __float2bfloat16(g.Next());
    DeviceBuffer xd = Upload(x), wd = Upload(w);
    DeviceBuffer yd = *DeviceBuffer::Allocate(static_cast<size_t>(c.rows) * c.out * 4, "y");
    auto read = [&] {
      std::vector<float> y(static_cast<size_t>(c.rows) * c.out);
      EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      EXPECT_EQ(cudaMemcpy(y.data(), yd.as(), y.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      return y;
    };
    ASSERT_TRUE(gemm_.Linear(xd.as<bf16>(), wd.as<bf16>(), c.rows, c.in, c.out, yd.as<float>(), 0.f, "t").ok());
    const std::vector<float> first = read();
    ASSERT_TRUE(gemm_.Linear(xd.as<bf16>(), wd.as<bf16>(), c.rows, c.in, c.out, yd.as<float>(), 0.f, "t").ok());
    const std::vector<float> again = read();
    EXPECT_EQ(std::memcmp(first.data(), again.data(), first.size() * 4), 0);
    ASSERT_EQ(cudaMemset(yd.as(), 0, first.size() * 4), cudaSuccess);
    ASSERT_NO_FATAL_FAILURE(LaunchCaptured(
        [&] { return gemm_.Linear(xd.as<bf16>(), wd.as<bf16>(), c.rows, c.in, c.out, yd.as<float>(), 0.f, "t"); }));
    const std::vector<float> replay = read();
    EXPECT_EQ(std::memcmp(first.data(), replay.data(), first.size() * 4), 0);
  }
}

// Host e4m3 codes and scale of one bf16 row (the rule the kernel follows).
float HostQuantizeRow(const bf16* x, int n, uint8_t* codes) {
  float amax = 0.f;
  for (int i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(__bfloat162float(x[i])));
  const float scale = kernels::E4m3Scale(amax);
  for (int i = 0; i < n; ++i) codes[i] = kernels::EncodeScaled(__bfloat162float(x[i]), scale);
  return scale;
}

TEST_F(GemmTest, Fp8QuantizesLikeTheHostAndMatchesFloat64OfItsCodes) {
  for (const Case c :
       {Case{1, 64, 96}, Case{7, 1536, 512}, Case{206, 1536, 512}, Case{2, 4096, 12288}, Case{33, 11008, 256}}) {
    SCOPED_TRACE(testing::Message() << c.rows << " x " << c.in << " -> " << c.out);
    Lcg g{static_cast<uint64_t>(c.rows * 977 + c.in)};
    std::vector<bf16> x(static_cast<size_t>(c.rows) * c.in), w(static_cast<size_t>(c.out) * c.in);
    std::vector<float> y0(static_cast<size_t>(c.rows) * c.out);
    for (auto& v : x) v = __float2bfloat16(g.Next());
    for (auto& v : w) v = __float2bfloat16(0.05f * g.Next());
    for (auto& v : y0) v = 4.0f * g.Next();
    if (c.rows > 2) {
      for (int i = 0; i < c.in; ++i) x[i] = __float2bfloat16(0.f);  // an all-zero row
      for (int i = 0; i < c.in; ++i) x[c.in + i] = __float2bfloat16(60.f * __bfloat162float(x[c.in + i]));  // outlier
    }
    DeviceBuffer xd = Upload(x), wd = Upload(w), yd = Upload(y0);
    DeviceBuffer codes = *DeviceBuffer::Allocate(w.size(), "w codes");
    DeviceBuffer scales = *DeviceBuffer::Allocate(static_cast<size_t>(c.out) * 4, "w scales");
    ASSERT_EQ(kernels::QuantizeRowsE4m3(wd.as<bf16>(), c.out, c.in, codes.as<uint8_t>(), scales.as<float>(), stream_),
              cudaSuccess);
    std::vector<uint8_t> wc(w.size()), want_wc(w.size());
    std::vector<float> ws(c.out), want_ws(c.out);
    ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(wc.data(), codes.as(), wc.size(), cudaMemcpyDeviceToHost), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(ws.data(), scales.as(), ws.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    for (int o = 0; o < c.out; ++o)
      want_ws[o] = HostQuantizeRow(&w[static_cast<size_t>(o) * c.in], c.in, &want_wc[static_cast<size_t>(o) * c.in]);
    ASSERT_EQ(std::memcmp(wc.data(), want_wc.data(), wc.size()), 0) << "weight codes differ from the host's";
    ASSERT_EQ(std::memcmp(ws.data(), want_ws.data(), ws.size() * 4), 0) << "weight scales differ from the host's";
    // The inputs as the GEMM quantizes them (the same rule, checked above).
    std::vector<uint8_t> xc(x.size());
    std::vector<float> xs(c.rows);
    for (int r = 0; r < c.rows; ++r)
      xs[r] = HostQuantizeRow(&x[static_cast<size_t>(r) * c.in], c.in, &xc[static_cast<size_t>(r) * c.in]);
    ASSERT_TRUE(gemm_.ReserveFp8Inputs(c.rows, c.in).ok());
    for (float beta : {0.f, 1.f}) {
      ASSERT_EQ(cudaMemcpy(yd.as(), y0.data(), y0.size() * 4, cudaMemcpyHostToDevice), cudaSuccess);
      const absl::Status s = gemm_.LinearFp8(xd.as<bf16>(), codes.as<uint8_t>(), scales.as<float>(), c.rows, c.in,
                                             c.out, yd.as<float>(), beta, "t");
      ASSERT_TRUE(s.ok()) << s;
      std::vector<float> y(y0.size());
      ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(y.data(), yd.as(), y.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      double worst = 0;
      for (int r = 0; r < c.rows; ++r)
        for (int o = 0; o < c.out; ++o) {
          double want = beta * y0[static_cast<size_t>(r) * c.out + o], magnitude = 0;
          for (int i = 0; i < c.in; ++i) {
            const double t = static_cast<double>(kernels::DecodeE4m3(xc[static_cast<size_t>(r) * c.in + i])) * xs[r] *
                             kernels::DecodeE4m3(wc[static_cast<size_t>(o) * c.in + i]) * ws[o];
            want += t;
            magnitude += std::fabs(t);
          }
          const double got = y[static_cast<size_t>(r) * c.out + o];
          if (c.rows > 2 && r == 0) {
            ASSERT_EQ(got, static_cast<float>(want)) << "an all-zero row gives exactly beta * y";
            continue;
          }
          worst = std::max(worst, std::fabs(want - got) / std::max(magnitude, 1e-6));
        }
      std::printf("[ fp8 %d x %d -> %d beta %.0f ] worst error %.2e of the products' magnitude\n", c.rows, c.in, c.out,
                  beta, worst);
      EXPECT_LT(worst, 1e-3) << "beta " << beta;
    }
  }
}

TEST_F(GemmTest, Fp8RepeatsBitForBitAndReplaysFromAGraph) {
  const Case c{206, 1536, 512};
  Lcg g{5};
  std::vector<bf16> x(static_cast<size_t>(c.rows) * c.in), w(static_cast<size_t>(c.out) * c.in);
  for (auto& v : x) v = __float2bfloat16(g.Next());
  for (auto& v : w) v = __float2bfloat16(g.Next());
  DeviceBuffer xd = Upload(x), wd = Upload(w);
  DeviceBuffer codes = *DeviceBuffer::Allocate(w.size(), "w codes");
  DeviceBuffer scales = *DeviceBuffer::Allocate(static_cast<size_t>(c.out) * 4, "w scales");
  ASSERT_EQ(kernels::QuantizeRowsE4m3(wd.as<bf16>(), c.out, c.in, codes.as<uint8_t>(), scales.as<float>(), stream_),
            cudaSuccess);
  DeviceBuffer yd = *DeviceBuffer::Allocate(static_cast<size_t>(c.rows) * c.out * 4, "y");
  ASSERT_TRUE(gemm_.ReserveFp8Inputs(c.rows, c.in).ok());
  auto run = [&] {
    return gemm_.LinearFp8(xd.as<bf16>(), codes.as<uint8_t>(), scales.as<float>(), c.rows, c.in, c.out, yd.as<float>(),
                           0.f, "t");
  };
  auto read = [&] {
    std::vector<float> y(static_cast<size_t>(c.rows) * c.out);
    EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(y.data(), yd.as(), y.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
    return y;
  };
  ASSERT_TRUE(run().ok());
  const std::vector<float> first = read();
  ASSERT_TRUE(run().ok());
  const std::vector<float> again = read();
  EXPECT_EQ(std::memcmp(first.data(), again.data(), first.size() * 4), 0);
  ASSERT_EQ(cudaMemset(yd.as(), 0, first.size() * 4), cudaSuccess);
  ASSERT_NO_FATAL_FAILURE(LaunchCaptured(run));
  const std::vector<float> replay = read();
  EXPECT_EQ(std::memcmp(first.data(), replay.data(), first.size() * 4), 0);
  // Beyond the reserved inputs: a clear error, nothing launched.
  const absl::Status beyond = gemm_.LinearFp8(xd.as<bf16>(), codes.as<uint8_t>(), scales.as<float>(), c.rows + 1, c.in,
                                              c.out, yd.as<float>(), 0.f, "t");
  EXPECT_FALSE(beyond.ok());
  EXPECT_NE(beyond.message().find("reserved"), std::string::npos) << beyond;
}

}  // namespace
}  // namespace argen::cuda
