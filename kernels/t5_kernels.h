// Device kernels of the T5 encoder stack on the GPU (engine/vq_cuda/
// cuda_t5_stack.h), fp32 throughout, on row-major activations [tokens][dim].
// The GEMMs are cuBLAS's; these are the small kernels between them. Every
// launcher returns the launch error (cudaSuccess when queued).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace argen::kernels {

// T5LayerNorm: out[r][i] = weight[i] * (x[r][i] * rsqrt(mean_i(x[r]^2) + eps))
// (no mean subtraction, no bias); one block per row. in == out is allowed.
cudaError_t T5RmsNorm(const float* x, const float* weight, int32_t rows, int32_t dim, float eps, float* out,
                      cudaStream_t stream);

// In place over scores [heads][n][n] (row i of head h holds query i's scores):
// s[h][i][j] = softmax_j(s[h][i][j] + rel_bias[bucket(j - i) * heads + h]),
// bucket(r) = buckets[r + max_len - 1] (the host's T5RelativeBucket table for
// r in [-(max_len - 1), max_len - 1]); n <= max_len. Max and sum in float, as
// the CPU encoder. One block per row.
cudaError_t T5BiasSoftmax(float* scores, const float* rel_bias, const int32_t* buckets, int32_t max_len, int32_t heads,
                          int32_t n, cudaStream_t stream);

// gate_up [rows][2 * ff] (wi_0's output, then wi_1's):
// out[r][f] = gelu_tanh(gate_up[r][f]) * gate_up[r][ff + f] (transformers' gelu_new).
cudaError_t T5GatedGelu(const float* gate_up, int32_t rows, int32_t ff, float* out, cudaStream_t stream);

}  // namespace argen::kernels
