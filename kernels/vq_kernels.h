// Device kernels of the VQ-16 image decoder (engine/vq_cuda), fp32 throughout.
// Every launcher returns the launch error (cudaSuccess when queued).
//
// Layout: activations are channel-major over the whole batch chunk,
// x[c][n*hw + p] for channel c, image n, pixel p = y*w + x ("[C][N*H*W]").
// With it every convolution of a chunk is ONE GEMM:
//   out[cout][N*hw] = W[cout][cin*k*k] x col[cin*k*k][N*hw]
// (a 1x1 conv reads its input directly as col), the per-channel bias is one
// row-broadcast, GroupNorm statistics of image n, group g are the columns
// [n*hw, (n+1)*hw) of that group's channel rows, and image n of a chunk of one
// is exactly the CPU decoder's CHW buffer. The im2col columns of a 3x3 conv
// may be built in bands of consecutive columns [col0, col0 + cols) of the
// N*hw axis (a band may cross image boundaries), bounding the workspace.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace argen::kernels {

// Columns [col0, col0 + cols) of the im2col matrix of a 3x3, stride 1, pad 1
// conv over in[cin][images*h*w]:
//   col[(c*3 + ky)*3 + kx][j] = in[c][n*hw + (y+ky-1)*w + (x+kx-1)] (0 outside the image)
// where col0 + j = n*hw + y*w + x. col is [cin*9][cols] (row stride cols).
cudaError_t VqIm2Col3x3(const float* in, int32_t cin, int32_t images, int32_t h, int32_t w, int64_t col0, int64_t cols,
                        float* col, cudaStream_t stream);

// out[o][i] = bias[o] (accumulate: out[o][i] += bias[o]) for i < n; out is [rows][n].
cudaError_t VqBiasRows(float* out, const float* bias, int32_t rows, int64_t n, bool accumulate, cudaStream_t stream);

// y[i] += x[i], i < n.
cudaError_t VqAddInPlace(float* y, const float* x, int64_t n, cudaStream_t stream);

// nn.GroupNorm(groups, channels, eps) on x[channels][images*hw] with optional
// swish (y * sigmoid(y)), one block per (image, group). Statistics as the CPU
// decoder computes them (engine/vq/group_norm.cc): two passes accumulated in
// double, per-channel scale/shift folded in double and applied in float.
// in == out is allowed.
cudaError_t VqGroupNorm(const float* in, const float* gamma, const float* beta, int32_t channels, int32_t groups,
                        int32_t images, int64_t hw, float eps, bool swish, float* out, cudaStream_t stream);

// F.interpolate(scale_factor=2, mode="nearest"): in [c][images*h*w] -> out [c][images*2h*2w].
cudaError_t VqUpsampleNearest2x(const float* in, int32_t c, int32_t images, int32_t h, int32_t w, float* out,
                                cudaStream_t stream);

// Codebook lookup: out[c][i] = codebook[tokens[i]][c] for i < n (the images'
// token grids back to back, raster order), c < dim. The codebook is already
// l2-normalised on the host when configured (vq::LoadVqDecoderWeights), so the
// rows are bit-identical to the CPU decoder's. Ids outside [0, codebook_size)
// give zero columns (callers validate first).
cudaError_t VqCodebookLookup(const float* codebook, int32_t codebook_size, int32_t dim, const int32_t* tokens,
                             int64_t n, float* out, cudaStream_t stream);

// In-place softmax of `rows` rows of n floats (row stride n), as the CPU's
// SpatialAttention does: float max, float exp(x - max), sum in double, scale
// by float(1 / sum).
cudaError_t VqSoftmaxRows(float* scores, int64_t rows, int32_t n, cudaStream_t stream);

// The official pixel conversion, bit for bit as engine/vq/pixels.cc given the
// same floats: v = (x + 1) / 2 * 255 in float (no contraction), NaN and
// negatives -> 0, > 255 -> 255, truncated. chw [3][images*hw] -> rgb
// [images][hw][3] (HWC per image, images back to back).
cudaError_t VqToRgb8(const float* chw, int32_t images, int64_t hw, uint8_t* rgb, cudaStream_t stream);

}  // namespace argen::kernels
