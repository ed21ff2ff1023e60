#include "engine/families/llamagen/host_math.h"

#include <cblas.h>

#include <cmath>

namespace argen::llamagen {

void HostLinear(const float* x, int64_t rows, const std::vector<float>& w, int32_t in, int32_t out, float* y) {
  if (rows == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(rows), out, in, 1.0f, x, in, w.data(), in, 0.0f,
              y, out);
}

float GeluTanh(float x) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + 0.044715f * x * x * x)));
}

}  // namespace argen::llamagen
