// Elementwise and row-wise kernels of the decoder stack and its stages
// (engine/model/model_spec.h), in f32 on contiguous row-major buffers. GEMMs
// are not here: they go through BLAS (engine/cpu/gemm.h).
#pragma once

#include <cstdint>

namespace argen::cpu {

// out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight, for `rows` rows of `dim`.
void RmsNorm(const float* x, const float* weight, int64_t rows, int32_t dim, float eps, float* out);

// out[r] = (x[r] - mean) / sqrt(var + eps) * weight + bias (torch LayerNorm,
// biased variance).
void LayerNorm(const float* x, const float* weight, const float* bias, int64_t rows, int32_t dim, float eps,
               float* out);

// RMSNorm when `bias` is null, else LayerNorm.
void Norm(const float* x, const float* weight, const float* bias, int64_t rows, int32_t dim, float eps, float* out);

// In place, per token row of `stride` floats: the `heads` vectors of
// `head_dim` starting at offset 0 each go through a LayerNorm over head_dim
// with that head's weight and bias (weight[h * head_dim + i]): HF
// ChameleonLayerNorm on q or k.
void HeadLayerNorm(float* x, int64_t rows, int64_t stride, int32_t heads, int32_t head_dim, const float* weight,
                   const float* bias, float eps);

// out[r] = what an fp8 GEMM input row gives back (weight_dtype fp8, the
// reference of kernels/fp8_linear.h): x[r] rounded to bf16 (the CUDA
// backend's GEMM inputs), then through e4m3 with one scale per row:
// decode(code) * scale, scale = amax / 448. `out` may be `x`.
void RoundRowsThroughE4m3(const float* x, int64_t rows, int32_t cols, float* out);

// x[r] += Norm(y[r]) (the swin-norm residual: h = x + norm(sublayer(x))).
void AddNorm(const float* y, const float* weight, const float* bias, int64_t rows, int32_t dim, float eps, float* x,
             float* scratch);

// out[i] = silu(gate_up[r][i]) * gate_up[r][inter + i]: gate and up halves of a fused projection.
void SiluMul(const float* gate_up, int64_t rows, int32_t inter, float* out);

// In place exact GELU (erf form, torch.nn.GELU() default).
void GeluInPlace(float* x, int64_t n);

// x[r][i] += bias[i]
void AddBias(float* x, const float* bias, int64_t rows, int32_t dim);

// Rotary embedding (HF rotate_half convention) of `n_heads` heads of
// `head_dim` at one position: x[h][i] and x[h][i + head_dim/2] rotate by
// angle position * inv_freq[i]. cos_sin holds cos then sin of those angles
// (head_dim/2 each), computed once per position by RopeAngles.
void RopeAngles(const float* inv_freq, int32_t half_dim, int32_t position, float* cos_sin);
void ApplyRope(float* x, int32_t n_heads, int32_t head_dim, const float* cos_sin);

// LlamaGen's 2-D RoPE (model::RopeKind::kGrid2d) at grid cell (row, col):
// pair i < quarter turns by row * inv_freq[i], pair quarter + i by
// col * inv_freq[i] (quarter = head_dim / 4). Same cos-then-sin layout.
void RopeAnglesGrid2d(const float* inv_freq, int32_t quarter, int32_t row, int32_t col, float* cos_sin);
// Interleaved pairs: x[h][2i] and x[h][2i + 1] rotate by pair i's angle.
void ApplyRopeInterleaved(float* x, int32_t n_heads, int32_t head_dim, const float* cos_sin);

}  // namespace argen::cpu
