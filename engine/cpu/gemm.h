// y = x W^T (+ beta y) through OpenBLAS, with W in PyTorch's [out x in] layout.
#pragma once

#include <cstdint>

namespace argen::cpu {

// y[rows x out] = x[rows x in] * W[out x in]^T + beta * y
void MatMulWT(const float* x, const float* w, int64_t rows, int32_t in, int32_t out, float* y, float beta = 0.0f);

// Tests: on runs every product one row a GEMM, so a row's result is the same
// whatever batch it is in (OpenBLAS rounds a row differently at different row
// counts, and on some CPUs by its place in a fixed-size tile of rows); off (the
// default): one GEMM. Process-wide.
void SetRowInvariantGemms(bool on);

// Sets the BLAS thread count; threads <= 0 keeps the library default (all cores).
void SetBlasThreads(int32_t threads);

}  // namespace argen::cpu
