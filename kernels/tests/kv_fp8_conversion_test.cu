// kernels/kv_fp8.h's e4m3 encode (what the KV append runs on the device and
// the CPU backend runs on the host) against CUDA's own conversion
// (__nv_cvt_float_to_fp8, saturating), and its decode against the hardware
// fp8 -> half conversion the attention kernel reads with: bit for bit.
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/kv_fp8.h"
#include "kernels/tests/cuda_test_util.h"

namespace argen::kernels {
namespace {

__global__ void EncodeBoth(const float* x, int n, uint8_t* ours, uint8_t* cuda) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  ours[i] = EncodeE4m3(x[i]);
  cuda[i] = __nv_cvt_float_to_fp8(x[i], __NV_SATFINITE, __NV_E4M3);
}

__global__ void DecodeAll(float* ours, float* hardware) {
  const int c = threadIdx.x;
  ours[c] = DecodeE4m3(static_cast<uint8_t>(c));
  const __half_raw h = __nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(c), __NV_E4M3);
  hardware[c] = __half2float(__half(h));
}

TEST(KvFp8ConversionTest, EncodeMatchesCudaAndTheHost) {
  ASSERT_NO_FATAL_FAILURE(testing::RequireDevice());
  std::mt19937 rng(3);
  std::vector<float> x;
  // Every code's value and both neighbours, the midpoints between codes, and random floats over the range.
  for (int c = 0; c < 0x7f; ++c) {
    const float v = DecodeE4m3(static_cast<uint8_t>(c)), w = c < 0x7e ? DecodeE4m3(static_cast<uint8_t>(c + 1)) : 500.f;
    for (float s : {1.f, -1.f}) {
      x.push_back(s * v);
      x.push_back(s * std::nextafter(v, 0.f));
      x.push_back(s * std::nextafter(v, 1e9f));
      x.push_back(s * (v + w) / 2);
    }
  }
  std::uniform_real_distribution<float> exponent(-14.f, 10.f);
  std::uniform_real_distribution<float> mantissa(1.f, 2.f);
  for (int i = 0; i < 1 << 20; ++i) x.push_back((i % 2 ? -1.f : 1.f) * mantissa(rng) * std::exp2(exponent(rng)));
  x.push_back(0.f);
  x.push_back(-0.f);
  x.push_back(1e30f);
  x.push_back(-1e30f);
  const int n = static_cast<int>(x.size());
  testing::DeviceArray<float> x_d(x);
  testing::DeviceArray<uint8_t> ours(n), cuda(n);
  EncodeBoth<<<(n + 255) / 256, 256>>>(x_d.get(), n, ours.get(), cuda.get());
  ARGEN_CUDA_OK(cudaDeviceSynchronize());
  const auto ours_h = ours.Download(), cuda_h = cuda.Download();
  int mismatches = 0;
  for (int i = 0; i < n; ++i) {
    if (ours_h[i] != cuda_h[i] && ++mismatches <= 10) {
      ADD_FAILURE() << "x = " << x[i] << ": ours " << int{ours_h[i]} << ", CUDA " << int{cuda_h[i]};
    }
    if (ours_h[i] != EncodeE4m3(x[i]) && ++mismatches <= 10) ADD_FAILURE() << "device and host differ at " << x[i];
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(KvFp8ConversionTest, DecodeMatchesTheHardwareConversion) {
  ASSERT_NO_FATAL_FAILURE(testing::RequireDevice());
  testing::DeviceArray<float> ours(256), hardware(256);
  DecodeAll<<<1, 256>>>(ours.get(), hardware.get());
  ARGEN_CUDA_OK(cudaDeviceSynchronize());
  const auto a = ours.Download(), b = hardware.Download();
  for (int c = 0; c < 256; ++c) {
    if ((c & 0x7f) == 0x7f) {
      EXPECT_TRUE(std::isnan(a[c]) && std::isnan(b[c])) << c;
      continue;
    }
    EXPECT_EQ(a[c], b[c]) << "code " << c;
    EXPECT_EQ(a[c], DecodeE4m3(static_cast<uint8_t>(c))) << "host, code " << c;
  }
}

}  // namespace
}  // namespace argen::kernels
