// Device-side fills for random benchmark weights.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace argen::kernels {

cudaError_t FillF32(float* p, int64_t n, float value);
// Uniform in [-sqrt(3) s, sqrt(3) s] (standard deviation s) from a counter hash of (seed, stream, i).
cudaError_t FillRandomBf16(__nv_bfloat16* p, int64_t n, uint64_t seed, uint64_t stream, float s);

}  // namespace argen::kernels
