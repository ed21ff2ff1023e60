// Test helpers: device buffers, bf16 conversion on the host, random inputs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/bf16.h"

namespace argen::kernels::testing {

#define ARGEN_CUDA_OK(expr)                                                                \
  do {                                                                                     \
    const cudaError_t argen_err_ = (expr);                                                 \
    ASSERT_EQ(argen_err_, cudaSuccess) << #expr << ": " << cudaGetErrorString(argen_err_); \
  } while (0)

// The host's bf16 rounding (common/bf16.h: nearest even, a NaN stays a NaN) under the tests' names.
inline uint16_t ToBf16Bits(float f) { return FloatToBf16Bits(f); }
inline float FromBf16Bits(uint16_t b) { return Bf16BitsToFloat(b); }
inline float RoundBf16(float f) { return RoundToBf16(f); }

template <typename T>
class DeviceArray {
 public:
  explicit DeviceArray(size_t n) : n_(n) {
    if (n_ > 0 && cudaMalloc(&ptr_, n_ * sizeof(T)) != cudaSuccess) ptr_ = nullptr;
  }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) { Upload(host); }
  ~DeviceArray() { cudaFree(ptr_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return ptr_; }
  size_t size() const { return n_; }
  void Upload(const std::vector<T>& host) {
    cudaMemcpy(ptr_, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice);
  }
  std::vector<T> Download() const {
    std::vector<T> host(n_);
    cudaMemcpy(host.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
    return host;
  }
  // Fills with a byte pattern so unwritten outputs are visible.
  void Poison(int byte = 0x7f) { cudaMemset(ptr_, byte, n_ * sizeof(T)); }

 private:
  size_t n_ = 0;
  T* ptr_ = nullptr;
};

using Bf16Bits = uint16_t;  // host view of __nv_bfloat16

inline std::vector<float> RandomFloats(std::mt19937& rng, size_t n, float scale = 1.0f) {
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

inline std::vector<Bf16Bits> ToBf16(const std::vector<float>& v) {
  std::vector<Bf16Bits> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = ToBf16Bits(v[i]);
  return out;
}

// ||a - b|| / ||b||.
inline double RelativeError(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isfinite(a[i])) return INFINITY;
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

// y = x W^T in double over the bf16 values of x [rows x k] and a torch Linear
// weight w [n x k]; `scale` gets sum_j |x w| per output (the fp32
// accumulation's error scales with it).
inline void ReferenceLinear(const std::vector<float>& x, const std::vector<float>& w, int rows, int k, int n,
                            std::vector<double>* y, std::vector<double>* scale) {
  y->assign(static_cast<size_t>(rows) * n, 0.0);
  scale->assign(y->size(), 0.0);
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < n; ++c) {
      double sum = 0, mag = 0;
      for (int j = 0; j < k; ++j) {
        const double t =
            double{RoundBf16(x[static_cast<size_t>(r) * k + j])} * RoundBf16(w[static_cast<size_t>(c) * k + j]);
        sum += t;
        mag += std::abs(t);
      }
      (*y)[static_cast<size_t>(r) * n + c] = sum;
      (*scale)[static_cast<size_t>(r) * n + c] = mag;
    }
  }
}

inline void RequireDevice() {
  int n = 0;
  ASSERT_EQ(cudaGetDeviceCount(&n), cudaSuccess) << "no CUDA device: this test is labelled gpu";
  ASSERT_GT(n, 0);
}

}  // namespace argen::kernels::testing
