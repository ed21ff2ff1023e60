#include "kernels/fault_kernels.h"

#include <algorithm>

namespace argen::kernels {
namespace {

__global__ void FlagNonFiniteKernel(const float* x, int64_t n, int32_t* flag) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += stride) {
    if ((__float_as_uint(x[i]) & 0x7f800000u) == 0x7f800000u) {
      *flag = 1;  // every writer writes the same value: no atomics needed
      return;
    }
  }
}

__global__ void NoOpKernel() {}

__global__ void IllegalWriteKernel(int32_t* p) { *p = 1; }

}  // namespace

cudaError_t FlagNonFinite(const float* x, int64_t n, int32_t* flag, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  const int blocks = static_cast<int>(std::clamp<int64_t>((n + kThreads - 1) / kThreads, 1, 1024));
  FlagNonFiniteKernel<<<blocks, kThreads, 0, stream>>>(x, n, flag);
  return cudaGetLastError();
}

cudaError_t LaunchInvalidConfiguration(cudaStream_t stream) {
  NoOpKernel<<<0, 1, 0, stream>>>();  // a grid of zero blocks is invalid
  return cudaGetLastError();          // returns and clears the launch error
}

cudaError_t LaunchIllegalAddressWrite(cudaStream_t stream) {
  // An address in the never-mapped first page of the device address space.
  IllegalWriteKernel<<<1, 1, 0, stream>>>(reinterpret_cast<int32_t*>(0x10));
  if (cudaError_t launch = cudaGetLastError(); launch != cudaSuccess) return launch;
  return cudaStreamSynchronize(stream);
}

}  // namespace argen::kernels
