// Device kernels of Emu3's vision decoder on the GPU (engine/vq_cuda's
// CudaEmu3VqDecoder), beside the VQ-16 ones it shares (kernels/vq_kernels.h).
// Same layout: fp32 activations channel-major over the chunk, x[c][n*hw + p].
// Every launcher returns the launch error (cudaSuccess when queued).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace argen::kernels {

// out[c][i] = swish(in[c][i] * scale[c] + shift[c]) for i < n (an eval-mode
// BatchNorm folded to a per-channel affine, then swish). in == out is allowed.
cudaError_t Emu3ChannelAffineSwish(const float* in, const float* scale, const float* shift, int32_t channels, int64_t n,
                                   float* out, cudaStream_t stream);

// x[i] = swish(x[i]) = x / (1 + exp(-x)), i < n.
cudaError_t Emu3SwishInPlace(float* x, int64_t n, cudaStream_t stream);

// SpatialNorm's modulation, in place on the GroupNorm output x [c][images*h*w]:
//   x = x * scale[c][n, sy, sx] + shift[c][n, sy, sx]   (then swish when asked)
// where scale / shift [c][images*zh*zw] are conv_y / conv_b of the condition
// at its own (code) resolution and (sy, sx) = (y*zh/h, x*zw/w), floored: the
// nearest resize F.interpolate(size=(h, w), mode="nearest") makes, which
// commutes with the 1x1 convolutions.
cudaError_t Emu3SpatialModulate(float* x, const float* scale, const float* shift, int32_t channels, int32_t images,
                                int32_t h, int32_t w, int32_t zh, int32_t zw, bool swish, cudaStream_t stream);

}  // namespace argen::kernels
