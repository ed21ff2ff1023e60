// Test kernel: occupies `stream` until *device_flag (host-mapped memory) becomes non-zero.
#pragma once

#include <cuda_runtime.h>

namespace argen::vq::testing {

cudaError_t LaunchSpinUntilFlag(const int* device_flag, cudaStream_t stream);

}  // namespace argen::vq::testing
