// The fp32 / TF32 building blocks the GPU image decoders share (CudaVqDecoder's
// fp32 path, CudaEmu3VqDecoder), on channel-major activations [C][N*H*W]
// (kernels/vq_kernels.h): a convolution of a whole chunk is one cuBLAS SGEMM
// (3x3 through im2col, in column bands that fit the caller's band buffer), and
// single-head spatial attention is two strided-batched GEMMs around the
// softmax kernel. Everything is enqueued on the context's stream (the cuBLAS
// handle must be bound to it); nothing allocates or synchronises. TF32 is the
// handle's math mode, set by the caller.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"

namespace argen::vq {

struct Fp32VqContext {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  float* col = nullptr;   // im2col band
  size_t col_floats = 0;  // its size: at least cin * 9 of the widest 3x3 conv
};

// A Conv2d (kernel 1 or 3, stride 1, pad kernel / 2) on the device:
// weight [cout][cin][k][k], bias [cout].
struct Fp32ConvParams {
  int32_t cin = 0, cout = 0, kernel = 1;
  const float* weight = nullptr;
  const float* bias = nullptr;
};

// out[cout][n*h*w] = conv(in[cin][n*h*w]) + bias, or += with accumulate.
// out must not overlap in.
absl::Status Fp32Conv2d(const Fp32VqContext& ctx, const Fp32ConvParams& c, const float* in, int32_t n, int32_t h,
                        int32_t w, float* out, bool accumulate, const char* what);

// Per image of n: out[:, i] = sum_j softmax_j(q[:, i] . k[:, j] / sqrt(c)) v[:, j],
// q, k, v, out [c][n*hw]; scores [n][hw][hw] scratch.
absl::Status Fp32SpatialAttention(const Fp32VqContext& ctx, const float* q, const float* k, const float* v, int32_t c,
                                  int32_t n, int64_t hw, float* scores, float* out);

}  // namespace argen::vq
