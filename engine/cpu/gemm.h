// y = x W^T (+ beta y) through OpenBLAS, with W in PyTorch's [out x in] layout.
#pragma once

#include <cstdint>

namespace argen::cpu {

// y[rows x out] = x[rows x in] * W[out x in]^T + beta * y
void MatMulWT(const float* x, const float* w, int64_t rows, int32_t in, int32_t out, float* y, float beta = 0.0f);

// Tests: rows > 0 runs every product as GEMMs of exactly that many rows
// (padded); 0 (the default): off. Process-wide. With 1 a row's result is the
// same whatever batch it is in (OpenBLAS rounds a row differently at different
// row counts); with more, only where OpenBLAS's kernel rounds every row of a
// tile alike, which depends on the CPU (a tile of 16 did on earlier CI machines, not
// on an AMD EPYC): tests that need exactness use 1.
void SetGemmRowTile(int32_t rows);

// Sets the BLAS thread count; threads <= 0 keeps the library default (all cores).
void SetBlasThreads(int32_t threads);

}  // namespace argen::cpu
