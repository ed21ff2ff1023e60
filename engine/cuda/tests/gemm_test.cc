// engine/cuda/gemm.h: the cuBLASLt paths (heuristic, tuned) against the
// cublasGemmEx path on random bf16 operands, beta 0 and 1 (the residual add),
// rows 1, 7, 206 at the tiny 64x96 and the 7B-like 4096x11008 shapes; the
// tuned path repeats bit for bit across calls and Gemm objects, tuning a
// beta 1 shape leaves the residual intact, a shape first met in stream
// capture runs untimed, and misaligned operands fall back to cublasGemmEx.
#include "engine/cuda/gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <algorithm>
#include <vector>

#include "engine/cuda/device_buffer.h"

namespace argen::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kMaxRows = 206;

// Deterministic uniform values in [-1, 1).
struct Lcg {
  uint64_t s;
  float Next() {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<float>((s >> 40) & 0xFFFFFF) / 8388608.0f - 1.0f;
  }
};

class Operands {
 public:
  Operands(int in, int out, uint64_t seed) : in_(in), out_(out) {
    Lcg g{seed};
    std::vector<bf16> hx(static_cast<size_t>(kMaxRows + 1) * in), hw(static_cast<size_t>(out) * in + 8);
    std::vector<float> hy(static_cast<size_t>(kMaxRows + 1) * out);
    for (auto& v : hx) v = __float2bfloat16(g.Next());
    for (auto& v : hw) v = __float2bfloat16(g.Next());
    for (auto& v : hy) v = 4.0f * g.Next();
    x_ = Upload(hx);
    w_ = Upload(hw);
    y0_ = Upload(hy);
    y_ = *DeviceBuffer::Allocate(hy.size() * sizeof(float), "y");
  }
  int in() const { return in_; }
  int out() const { return out_; }
  const bf16* x(int offset = 0) const { return x_.as<bf16>() + offset; }
  const bf16* w() const { return w_.as<bf16>(); }
  float* y(int offset = 0) const { return y_.as<float>() + offset; }
  // y <- the initial residual (enqueued on `stream`; capturable).
  void ResetY(cudaStream_t stream) const {
    ASSERT_EQ(cudaMemcpyAsync(y_.as(), y0_.as(), y_.bytes(), cudaMemcpyDeviceToDevice, stream), cudaSuccess);
  }
  std::vector<float> ReadY(cudaStream_t stream, int rows, int offset = 0) const {
    std::vector<float> h(static_cast<size_t>(rows) * out_);
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(h.data(), y(offset), h.size() * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }

 private:
  template <typename T>
  static DeviceBuffer Upload(const std::vector<T>& h) {
    DeviceBuffer b = *DeviceBuffer::Allocate(h.size() * sizeof(T), "operand");
    EXPECT_EQ(cudaMemcpy(b.as(), h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    return b;
  }
  int in_, out_;
  DeviceBuffer x_, w_, y0_, y_;
};

// Max |got - want| / max(|want|, rms(want)) over the elements (fp32 accumulation in another order).
double MaxRelError(const std::vector<float>& got, const std::vector<float>& want) {
  double ss = 0;
  for (float v : want) ss += static_cast<double>(v) * v;
  const double rms = std::sqrt(ss / std::max<size_t>(1, want.size()));
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    const double d = std::fabs(static_cast<double>(got[i]) - want[i]) / std::max<double>(std::fabs(want[i]), rms);
    worst = std::max(worst, d);
  }
  return worst;
}

size_t Mismatches(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return std::max(a.size(), b.size());
  size_t n = 0;
  for (size_t i = 0; i < a.size(); ++i) n += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return n;
}

class GemmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_TRUE(gemm_.Init(stream_, static_cast<size_t>(kMaxRows) * 11008).ok());
  }
  void TearDown() override {
    cudaStreamSynchronize(stream_);
    gemm_.Reset();
    cudaStreamDestroy(stream_);
  }
  // y = y0 (or the residual), then one Linear in `mode`; returns rows x out.
  std::vector<float> Run(Gemm& g, GemmMode mode, const Operands& op, int rows, float beta) {
    g.SetMode(mode);
    op.ResetY(stream_);
    const absl::Status s = g.Linear(op.x(), op.w(), rows, op.in(), op.out(), op.y(), beta, "test");
    EXPECT_TRUE(s.ok()) << s;
    return op.ReadY(stream_, rows);
  }
  std::vector<float> Reference(const Operands& op, int rows, float beta, int x_off = 0, int y_off = 0) {
    op.ResetY(stream_);
    const absl::Status s =
        LinearBf16(gemm_.cublas(), op.x(x_off), op.w(), rows, op.in(), op.out(), op.y(y_off), beta, "reference");
    EXPECT_TRUE(s.ok()) << s;
    return op.ReadY(stream_, rows, y_off);
  }
  // Every mode at rows 1, 7, kMaxRows and beta 0, 1 against cublasGemmEx; the
  // tuned mode (whose first call tunes) repeats its bits on two more calls.
  void CheckShape(const Operands& op) {
    for (int rows : {1, 7, kMaxRows}) {
      for (float beta : {0.f, 1.f}) {
        const std::vector<float> want = Reference(op, rows, beta);
        for (GemmMode mode : {GemmMode::kCublas, GemmMode::kLtHeuristic, GemmMode::kLtTuned}) {
          SCOPED_TRACE(testing::Message() << GemmModeName(mode) << " rows " << rows << " in " << op.in() << " out "
                                          << op.out() << " beta " << beta);
          const std::vector<float> got = Run(gemm_, mode, op, rows, beta);
          const double err = MaxRelError(got, want);
          EXPECT_LE(err, 1e-3);
          if (mode == GemmMode::kCublas) continue;
          std::printf("[ %s rows %d %dx%d beta %g ] max rel error vs cublasGemmEx %.2e\n", GemmModeName(mode), rows,
                      op.in(), op.out(), beta, err);
          if (mode == GemmMode::kLtTuned) {
            for (int again = 0; again < 2; ++again)
              EXPECT_EQ(Mismatches(Run(gemm_, mode, op, rows, beta), got), 0u) << "repeat " << again;
          }
        }
      }
    }
  }
  cudaStream_t stream_ = nullptr;
  Gemm gemm_;
};

TEST_F(GemmTest, ModesNames) {
  for (GemmMode m : {GemmMode::kCublas, GemmMode::kLtHeuristic, GemmMode::kLtTuned}) {
    GemmMode back = GemmMode::kCublas;
    ASSERT_TRUE(ParseGemmMode(GemmModeName(m), &back));
    EXPECT_EQ(back, m);
  }
  GemmMode m;
  EXPECT_FALSE(ParseGemmMode("lt", &m));
}

TEST_F(GemmTest, SmallShapeAllPathsMatchGemmEx) {
  const Operands op(64, 96, 1);
  CheckShape(op);
}

TEST_F(GemmTest, LargeShapeAllPathsMatchGemmEx) {
  const Operands op(4096, 11008, 2);
  const GemmTuningStats before = GetGemmTuningStats();
  CheckShape(op);
  const GemmTuningStats after = GetGemmTuningStats();
  std::printf("[ tuning ] %d shapes timed, %d untimed, %.1f ms so far\n", after.shapes_tuned, after.shapes_untimed,
              after.tuning_ms);
  EXPECT_GT(after.shapes_tuned + after.shapes_untimed, before.shapes_tuned + before.shapes_untimed);
  // A second Gemm object takes the process-wide choices: the same bits.
  Gemm other;
  ASSERT_TRUE(other.Init(stream_, 16).ok());
  for (float beta : {0.f, 1.f}) {
    const std::vector<float> a = Run(gemm_, GemmMode::kLtTuned, op, kMaxRows, beta);
    const std::vector<float> b = Run(other, GemmMode::kLtTuned, op, kMaxRows, beta);
    EXPECT_EQ(Mismatches(a, b), 0u) << "beta " << beta;
  }
  cudaStreamSynchronize(stream_);
}

// A shape first met during capture runs the heuristic's first algorithm (no
// timing, which capture forbids); the replay is correct, and the eager calls
// of that shape afterwards run the same algorithm (same bits). A shape tuned
// eagerly and then captured replays the eager bits.
TEST_F(GemmTest, CaptureUsesFinalChoices) {
  const Operands op(64, 96, 3);
  for (int rows : {3, 11}) {
    for (float beta : {0.f, 1.f}) {
      SCOPED_TRACE(testing::Message() << "rows " << rows << " beta " << beta);
      const bool first_in_capture = rows == 3;
      const std::vector<float> want = Reference(op, rows, beta);
      std::vector<float> eager;
      if (!first_in_capture) eager = Run(gemm_, GemmMode::kLtTuned, op, rows, beta);
      const GemmTuningStats before = GetGemmTuningStats();
      gemm_.SetMode(GemmMode::kLtTuned);
      ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
      op.ResetY(stream_);
      const absl::Status s = gemm_.Linear(op.x(), op.w(), rows, op.in(), op.out(), op.y(), beta, "captured");
      cudaGraph_t graph = nullptr;
      ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
      ASSERT_TRUE(s.ok()) << s;
      cudaGraphExec_t exec = nullptr;
      ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
      cudaGraphDestroy(graph);
      ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
      const std::vector<float> replay = op.ReadY(stream_, rows);
      cudaGraphExecDestroy(exec);
      const GemmTuningStats after = GetGemmTuningStats();
      EXPECT_LE(MaxRelError(replay, want), 1e-3);
      EXPECT_EQ(after.shapes_tuned, before.shapes_tuned);  // nothing timed while capturing
      if (first_in_capture) {
        EXPECT_EQ(Mismatches(Run(gemm_, GemmMode::kLtTuned, op, rows, beta), replay), 0u);
      } else {
        EXPECT_EQ(Mismatches(replay, eager), 0u);
      }
    }
  }
}

// Operands not 16-byte aligned take cublasGemmEx (no cuBLASLt plan for them).
TEST_F(GemmTest, MisalignedOperandsFallBack) {
  const Operands op(64, 96, 4);
  for (float beta : {0.f, 1.f}) {
    const std::vector<float> want = Reference(op, 7, beta, /*x_off=*/8, /*y_off=*/1);
    gemm_.SetMode(GemmMode::kLtTuned);
    op.ResetY(stream_);
    const absl::Status s = gemm_.Linear(op.x(8), op.w(), 7, op.in(), op.out(), op.y(1), beta, "misaligned");
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_EQ(Mismatches(op.ReadY(stream_, 7, 1), want), 0u) << "beta " << beta;  // the same cublasGemmEx call
  }
}

}  // namespace
}  // namespace argen::cuda
