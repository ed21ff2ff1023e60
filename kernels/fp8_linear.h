// FP8 linear layers (weight_dtype "fp8"): W8A8 with e4m3 codes. A weight
// matrix [out x in] holds one f32 scale per output channel (row); a GEMM's
// input [rows x in] is quantized at run time with one f32 scale per row
// (token), so an outlier token or channel costs only its own precision. The
// GEMM (engine/cuda/gemm.h) multiplies the codes with f32 accumulation and
// applies scale_w[o] * scale_x[r] in its epilogue.
//
// The scale rule is kv_fp8.h's (E4m3Scale: amax / 448, codes EncodeScaled),
// so the CPU backend's reference rounds exactly as this kernel encodes.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace argen::kernels {

// codes[r][i] = e4m3(x[r][i] / scales[r]), scales[r] = amax(|x[r]|) / 448
// (0 for an all-zero row, whose codes are 0). One block per row; `cols` must
// be a multiple of 8 (16-byte loads) and `x` and `codes` 16-byte aligned.
cudaError_t QuantizeRowsE4m3(const __nv_bfloat16* x, int64_t rows, int32_t cols, uint8_t* codes, float* scales,
                             cudaStream_t stream);

}  // namespace argen::kernels
