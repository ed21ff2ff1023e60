// The decode step's GEMMs alone (qkv, o_proj, gate_up, down of one layer of
// `spec`), cuBLAS against the skinny kernel (kernels/skinny_gemm.h) at `rows`
// rows, both in one process: median time, the weight bytes read per second
// against a device-to-device copy measured in the same run, and the largest
// difference between the two results.
#pragma once

#include <string>
#include <vector>

#include "engine/model/model_spec.h"

namespace argen::bench {

struct GemmMicroRow {
  std::string name;  // qkv, o_proj, gate_up, down
  int rows = 0, in = 0, out = 0, splits = 0;
  double cublas_us = 0, skinny_us = 0;
  double cublas_gbs = 0, skinny_gbs = 0;  // weight bytes / time
  double max_rel_diff = 0;                // max |skinny - cublas| / max |cublas|
};

bool RunGemmMicro(const model::ModelSpec& spec, int rows, double* copy_gbs, std::vector<GemmMicroRow>* out,
                  std::string* error);

}  // namespace argen::bench
