// A kernel that holds its stream until the host sets a flag in mapped memory:
// the "long decode step" of the stream tests (cuda_vq_bf16_test).
#include "engine/vq_cuda/tests/spin_kernel.h"

namespace argen::vq::testing {
namespace {

__global__ void SpinUntilFlagKernel(const volatile int* flag) {
  while (*flag == 0) __nanosleep(1000);
}

}  // namespace

cudaError_t LaunchSpinUntilFlag(const int* device_flag, cudaStream_t stream) {
  SpinUntilFlagKernel<<<1, 1, 0, stream>>>(device_flag);
  return cudaGetLastError();
}

}  // namespace argen::vq::testing
