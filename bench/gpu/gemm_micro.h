// argen_bench --gemm-micro: one decoder layer's four projections (q|k|v, o,
// gate|up, down) of a model shape, bf16 (cublasGemmEx, as the engine calls it)
// and, at 1-4 rows, the skinny kernel (kernels/skinny_linear.h, an A/B option
// of the engine) against fp8 W8A8 (the input's per-row quantization plus the
// cuBLASLt fp8 product, Gemm::LinearFp8), at several row counts, in one process. Weights
// rotate over copies so that none is read from L2; the median of samples of
// back-to-back launches (the host's enqueue time not counted).
#pragma once

#include <string>
#include <vector>

#include "engine/model/model_spec.h"

namespace argen::bench {

struct GemmMicroRow {
  std::string name;
  int out = 0, in = 0, rows = 0;
  double bf16_us = 0, skinny_us = 0, fp8_us = 0;  // skinny_us: 0 above kSkinnyLinearMaxRows rows
};

// Prints one line per (projection, rows); false with `err` on a CUDA or cuBLAS failure.
bool RunGemmMicro(const model::StackConfig& stack, const std::vector<int>& rows, std::vector<GemmMicroRow>* out,
                  std::string* err);

}  // namespace argen::bench
