#include "bench/gpu/gemm_micro.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "engine/cuda/gemm.h"
#include "kernels/fill_kernels.h"
#include "kernels/skinny_gemm.h"

namespace argen::bench {
namespace {

constexpr int kCopies = 4;  // weight copies rotated so no call finds its weights in L2
constexpr int kIters = 40;

struct Buffers {
  std::vector<void*> ptrs;
  ~Buffers() {
    for (void* p : ptrs) cudaFree(p);
  }
  template <typename T>
  T* Alloc(size_t n) {
    void* p = nullptr;
    if (cudaMalloc(&p, std::max<size_t>(n, 1) * sizeof(T)) != cudaSuccess) return nullptr;
    ptrs.push_back(p);
    return static_cast<T*>(p);
  }
};

double Median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

bool RunGemmMicro(const model::ModelSpec& spec, int rows, double* copy_gbs, std::vector<GemmMicroRow>* out,
                  std::string* error) {
  const model::StackConfig& d = spec.stack;
  const int H = d.hidden_size, q_dim = d.num_heads * d.head_dim, qkv = q_dim + 2 * d.num_kv_heads * d.head_dim;
  const int I = d.intermediate_size;
  struct Shape {
    const char* name;
    int in, out;
    float beta;
  };
  const Shape shapes[] = {{"qkv", H, qkv, 0.f}, {"o_proj", q_dim, H, 1.f}, {"gate_up", H, 2 * I, 0.f},
                          {"down", I, H, 1.f}};
  Buffers b;
  cudaStream_t stream = nullptr;
  if (cudaStreamCreate(&stream) != cudaSuccess) {
    *error = "stream";
    return false;
  }
  cuda::Gemm gemm;
  if (absl::Status s = gemm.Init(stream); !s.ok()) {
    *error = std::string(s.message());
    return false;
  }
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  {  // copy bandwidth, 2 GiB device to device
    const size_t n = size_t{1} << 31;
    char* a = b.Alloc<char>(n);
    char* c = b.Alloc<char>(n);
    if (!a || !c) {
      *error = "copy buffers";
      return false;
    }
    cudaMemsetAsync(a, 1, n, stream);
    std::vector<float> t;
    for (int i = 0; i < 10; ++i) {
      cudaEventRecord(e0, stream);
      cudaMemcpyAsync(c, a, n, cudaMemcpyDeviceToDevice, stream);
      cudaEventRecord(e1, stream);
      cudaEventSynchronize(e1);
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      if (i >= 2) t.push_back(ms);
    }
    *copy_gbs = 2.0 * n / (Median(t) * 1e-3) / 1e9;
  }
  int device = 0, sms = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  for (const Shape& s : shapes) {
    GemmMicroRow row;
    row.name = s.name;
    row.rows = rows;
    row.in = s.in;
    row.out = s.out;
    row.splits = kernels::ChooseSkinnySplits(rows, s.in, s.out, sms, cuda::Gemm::kSkinnyWorkspaceBytes);
    const size_t w_elems = static_cast<size_t>(s.in) * s.out;
    __nv_bfloat16* w = b.Alloc<__nv_bfloat16>(w_elems * kCopies);
    __nv_bfloat16* x = b.Alloc<__nv_bfloat16>(static_cast<size_t>(rows) * s.in);
    float* y_ref = b.Alloc<float>(static_cast<size_t>(rows) * s.out);
    float* y = b.Alloc<float>(static_cast<size_t>(rows) * s.out);
    if (!w || !x || !y_ref || !y) {
      *error = "gemm buffers";
      return false;
    }
    kernels::FillRandomBf16(w, static_cast<int64_t>(w_elems) * kCopies, 7, 1, 0.02f);
    kernels::FillRandomBf16(x, static_cast<int64_t>(rows) * s.in, 7, 2, 1.0f);
    auto time = [&](cuda::GemmChoice choice, float* dst, double* us) -> bool {
      gemm.SetChoice(choice);
      std::vector<float> t;
      for (int i = 0; i < kIters + 4; ++i) {
        const __nv_bfloat16* wi = w + static_cast<size_t>(i % kCopies) * w_elems;
        cudaEventRecord(e0, stream);
        // beta 0 for the timing, so repeated calls do not grow the output
        if (!gemm.Linear(x, wi, rows, s.in, s.out, dst, 0.f, s.name).ok()) return false;
        cudaEventRecord(e1, stream);
        cudaEventSynchronize(e1);
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        if (i >= 4) t.push_back(ms);
      }
      *us = Median(t) * 1e3;
      return true;
    };
    if (!time(cuda::GemmChoice::kCublas, y_ref, &row.cublas_us) ||
        !time(cuda::GemmChoice::kSkinny, y, &row.skinny_us)) {
      *error = std::string("gemm launch: ") + s.name;
      return false;
    }
    // The results with the shape's real beta (the residual add), from the same start.
    kernels::FillF32(y_ref, static_cast<int64_t>(rows) * s.out, 0.5f);
    kernels::FillF32(y, static_cast<int64_t>(rows) * s.out, 0.5f);
    gemm.SetChoice(cuda::GemmChoice::kCublas);
    const bool ok_ref = gemm.Linear(x, w, rows, s.in, s.out, y_ref, s.beta, s.name).ok();
    gemm.SetChoice(cuda::GemmChoice::kSkinny);
    const bool ok = gemm.Linear(x, w, rows, s.in, s.out, y, s.beta, s.name).ok();
    std::vector<float> a(static_cast<size_t>(rows) * s.out), c(a.size());
    cudaMemcpy(a.data(), y_ref, a.size() * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(c.data(), y, c.size() * 4, cudaMemcpyDeviceToHost);
    if (!ok_ref || !ok || cudaGetLastError() != cudaSuccess) {
      *error = std::string("gemm check: ") + s.name;
      return false;
    }
    double top = 0, diff = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      top = std::max(top, static_cast<double>(std::fabs(a[i])));
      diff = std::max(diff, static_cast<double>(std::fabs(a[i] - c[i])));
      if (!std::isfinite(c[i])) diff = INFINITY;
    }
    row.max_rel_diff = diff / std::max(top, 1e-30);
    const double bytes = 2.0 * w_elems;
    row.cublas_gbs = bytes / (row.cublas_us * 1e-6) / 1e9;
    row.skinny_gbs = bytes / (row.skinny_us * 1e-6) / 1e9;
    out->push_back(row);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  gemm.Reset();
  cudaStreamDestroy(stream);
  return true;
}

}  // namespace argen::bench
