// The few host f32 operations the text side of LlamaGen t2i needs (the T5
// encoder, the caption MLP), run once per request on the CPU.
#pragma once

#include <cstdint>
#include <vector>

namespace argen::llamagen {

// y[rows x out] = x[rows x in] W^T, W a torch Linear weight [out x in] (OpenBLAS).
void HostLinear(const float* x, int64_t rows, const std::vector<float>& w, int32_t in, int32_t out, float* y);

// The tanh approximation of GELU: torch's GELU(approximate='tanh'),
// transformers' gelu_new.
float GeluTanh(float x);

}  // namespace argen::llamagen
