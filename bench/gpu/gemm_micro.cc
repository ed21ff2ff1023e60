#include "bench/gpu/gemm_micro.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <functional>

#include "absl/status/status.h"
#include "engine/cuda/device_buffer.h"
#include "engine/cuda/gemm.h"
#include "kernels/fill_kernels.h"
#include "kernels/fp8_linear.h"
#include "kernels/skinny_linear.h"

namespace argen::bench {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kCopies = 4;     // weight copies rotated (4 x the smallest matrix > the H200's 50 MB L2 for 7B)
constexpr int kLaunches = 40;  // timed samples per case
// Launches back to back in one sample: the GPU never waits for the host's
// enqueue (cuBLAS spends several microseconds of host time a call, which a
// single launch between two events would count; the engine's graphs do not).
constexpr int kBackToBack = 16;

// Median microseconds a launch of `launch(i)` over kLaunches samples of
// kBackToBack launches each, after 3 warm-up samples.
bool TimeMedian(cudaStream_t stream, const std::function<absl::Status(int)>& launch, double* us, std::string* err) {
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<float> ms;
  bool ok = true;
  for (int i = 0; i < kLaunches + 3 && ok; ++i) {
    cudaEventRecord(a, stream);
    for (int j = 0; j < kBackToBack && ok; ++j) {
      if (absl::Status s = launch(i * kBackToBack + j); !s.ok()) {
        *err = std::string(s.message());
        ok = false;
      }
    }
    if (!ok) break;
    cudaEventRecord(b, stream);
    cudaEventSynchronize(b);
    float t = 0;
    cudaEventElapsedTime(&t, a, b);
    if (i >= 3) ms.push_back(t);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  if (!ok) return false;
  std::sort(ms.begin(), ms.end());
  *us = 1000.0 * ms[ms.size() / 2] / kBackToBack;
  return true;
}

}  // namespace

bool RunGemmMicro(const model::StackConfig& d, const std::vector<int>& rows_list, std::vector<GemmMicroRow>* out,
                  std::string* err) {
  const int q_dim = d.num_heads * d.head_dim, qkv = q_dim + 2 * d.num_kv_heads * d.head_dim;
  struct Shape {
    const char* name;
    int out, in;
  };
  const Shape shapes[] = {{"qkv", qkv, d.hidden_size},
                          {"o_proj", d.hidden_size, q_dim},
                          {"gate_up", 2 * d.intermediate_size, d.hidden_size},
                          {"down", d.hidden_size, d.intermediate_size}};
  cudaStream_t stream = nullptr;
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  cuda::Gemm gemm;
  auto fail = [&](absl::Status s) {
    *err = std::string(s.message());
    gemm.Reset();
    cudaStreamDestroy(stream);
    return false;
  };
  if (absl::Status s = gemm.Init(stream); !s.ok()) return fail(s);
  const int max_rows = *std::max_element(rows_list.begin(), rows_list.end());
  const int max_in = std::max({d.hidden_size, q_dim, d.intermediate_size});
  const int max_out = std::max({qkv, d.hidden_size, 2 * d.intermediate_size});
  if (absl::Status s = gemm.ReserveFp8Inputs(max_rows, max_in); !s.ok()) return fail(s);
  auto alloc = [&](size_t bytes, const char* what) -> absl::StatusOr<cuda::DeviceBuffer> {
    return cuda::DeviceBuffer::Allocate(bytes, what);
  };
  absl::StatusOr<cuda::DeviceBuffer> x = alloc(size_t{2} * max_rows * max_in, "x");
  absl::StatusOr<cuda::DeviceBuffer> y = alloc(size_t{4} * max_rows * max_out, "y");
  if (!x.ok()) return fail(x.status());
  if (!y.ok()) return fail(y.status());
  kernels::FillRandomBf16(x->as<bf16>(), int64_t{max_rows} * max_in, 3, 1, 1.0f);
  cudaMemset(y->as(), 0, size_t{4} * max_rows * max_out);
  for (const Shape& sh : shapes) {
    const int64_t n = int64_t{sh.out} * sh.in;
    std::vector<cuda::DeviceBuffer> w16, w8, scales;
    for (int c = 0; c < kCopies; ++c) {
      absl::StatusOr<cuda::DeviceBuffer> a = alloc(n * 2, "w bf16"), b = alloc(n, "w fp8"),
                                         s = alloc(size_t{4} * sh.out, "w scales");
      if (!a.ok()) return fail(a.status());
      if (!b.ok()) return fail(b.status());
      if (!s.ok()) return fail(s.status());
      kernels::FillRandomBf16(a->as<bf16>(), n, 7, 10 + c, 0.02f);
      kernels::QuantizeRowsE4m3(a->as<bf16>(), sh.out, sh.in, b->as<uint8_t>(), s->as<float>(), nullptr);
      w16.push_back(*std::move(a));
      w8.push_back(*std::move(b));
      scales.push_back(*std::move(s));
    }
    if (cudaDeviceSynchronize() != cudaSuccess) return fail(absl::InternalError("weight setup failed"));
    for (int rows : rows_list) {
      GemmMicroRow r{sh.name, sh.out, sh.in, rows};
      const auto bf16_linear = [&](int i) {
        return gemm.Linear(x->as<bf16>(), w16[i % kCopies].as<bf16>(), rows, sh.in, sh.out, y->as<float>(), 0.f,
                           "bf16");
      };
      gemm.set_skinny(false);
      if (!TimeMedian(stream, bf16_linear, &r.bf16_us, err)) return fail(absl::InternalError(*err));
      if (rows <= kernels::kSkinnyLinearMaxRows) {
        gemm.set_skinny(true);
        const bool ok = TimeMedian(stream, bf16_linear, &r.skinny_us, err);
        gemm.set_skinny(false);
        if (!ok) return fail(absl::InternalError(*err));
      }
      const bool ok8 = TimeMedian(
          stream,
          [&](int i) {
            return gemm.LinearFp8(x->as<bf16>(), w8[i % kCopies].as<uint8_t>(), scales[i % kCopies].as<float>(), rows,
                                  sh.in, sh.out, y->as<float>(), 0.f, "fp8");
          },
          &r.fp8_us, err);
      if (!ok8) return fail(absl::InternalError(*err));
      const double flops = 2.0 * rows * n;
      std::printf(
          "gemm %-8s %6d x %-6d rows %5d: bf16 %9.1f us (%6.0f GB/s, %6.1f TFLOP/s)  fp8 %9.1f us (%6.0f GB/s, "
          "%6.1f TFLOP/s)  bf16/fp8 %.2fx",
          sh.name, sh.out, sh.in, rows, r.bf16_us, 2.0 * n / r.bf16_us / 1e3, flops / r.bf16_us / 1e6, r.fp8_us,
          1.0 * n / r.fp8_us / 1e3, flops / r.fp8_us / 1e6, r.bf16_us / r.fp8_us);
      if (r.skinny_us > 0) {
        std::printf("  skinny %9.1f us (%6.0f GB/s, split %d): %.2fx cuBLAS", r.skinny_us, 2.0 * n / r.skinny_us / 1e3,
                    kernels::SkinnyLinearSplit(rows, sh.in, sh.out), r.bf16_us / r.skinny_us);
      }
      std::printf("\n");
      std::fflush(stdout);
      out->push_back(r);
    }
  }
  gemm.Reset();
  cudaStreamDestroy(stream);
  return true;
}

}  // namespace argen::bench
