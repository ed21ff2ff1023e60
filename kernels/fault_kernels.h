// Device-side fault detection and (testing-only) fault injection kernels of
// the CUDA backend (engine/model/fault_guard.h describes the injection).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace argen::kernels {

// Sets *flag to 1 when any of x[0, n) is NaN or Inf (by bit pattern); never
// clears it. Enqueued on `stream`.
cudaError_t FlagNonFinite(const float* x, int64_t n, int32_t* flag, cudaStream_t stream);

// A kernel launch with an invalid configuration: returns the launch error
// (cudaErrorInvalidConfiguration), which does not corrupt the context.
cudaError_t LaunchInvalidConfiguration(cudaStream_t stream);

// A kernel that writes to an illegal address, then waits for it: returns
// cudaErrorIllegalAddress, after which the context is unusable (sticky).
cudaError_t LaunchIllegalAddressWrite(cudaStream_t stream);

}  // namespace argen::kernels
