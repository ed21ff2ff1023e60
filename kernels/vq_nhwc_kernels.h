// Device kernels of the VQ-16 decoder's bf16 path (engine/vq_cuda/vq_program.h
// says what each op means): channels-last activations x[n][h][w][c] in bf16,
// fp32 math, GroupNorm statistics in double. The convolutions themselves are
// cuDNN's and cuBLAS's; these are the memory-bound ops between them, each one
// pass (GroupNorm: two reads and one write).
//
// Requirements (launchers return cudaErrorInvalidValue otherwise): channel
// counts multiples of 8 and bf16 pointers 16-byte aligned (every access is a
// 16-byte vector of 8 channels); images <= 65535 (grid.y).
// Every launcher returns the launch error (cudaSuccess when queued).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace argen::kernels {

inline constexpr int32_t kVqGnMaxChannels = 2048;      // GroupNorm statistics: 8 channels a thread, 256 threads
inline constexpr int32_t kVqConvOutMaxChannels = 448;  // conv_out's filter in 48 KB of shared memory
inline constexpr int32_t kVqGnChunkPixels = 512;       // pixels per statistics block

// out[i][c] = table[tokens[i]][c] for i < count, c < dim; ids outside [0, rows) give zeros.
cudaError_t VqNhwcLookup(const __nv_bfloat16* table, int32_t rows, int32_t dim, const int32_t* tokens, int64_t count,
                         __nv_bfloat16* out, cudaStream_t stream);

// GroupNorm(groups, channels, eps) of v = x + in_bias[c] (in_bias may be null)
// over each image's h*w pixels, then swish (y * sigmoid(y)) when asked:
//   1. statistics: per (image, chunk of kVqGnChunkPixels pixels, channel) the
//      sum of v and of v^2 in double -> partial [images][chunks][channels];
//   2. per (image, group): mean and biased variance in double; per channel
//      scale = gamma / sqrt(var + eps), shift = beta + (in_bias - mean) * scale
//      -> scale_shift [images][channels] (fp32);
//   3. y = x * scale + shift (fp32), swish, stored as bf16. in == out allowed.
// Scratch: VqGroupNormPartialBytes(images, hw, channels) for partial and
// images * channels float2 for scale_shift.
int64_t VqGroupNormChunks(int64_t hw);
int64_t VqGroupNormPartialBytes(int32_t images, int64_t hw, int32_t channels);
cudaError_t VqNhwcGroupNorm(const __nv_bfloat16* in, const float* in_bias, const float* gamma, const float* beta,
                            int32_t images, int64_t hw, int32_t channels, int32_t groups, float eps, bool swish,
                            double2* partial, float2* scale_shift, __nv_bfloat16* out, cudaStream_t stream);

// Nearest 2x upsample with an input bias: out[n][2y+dy][2x+dx][c] = bf16(in[n][y][x][c] + bias[c])
// (bias may be null). out must not overlap in.
cudaError_t VqNhwcUpsample2x(const __nv_bfloat16* in, const float* bias, int32_t images, int32_t h, int32_t w,
                             int32_t channels, __nv_bfloat16* out, cudaStream_t stream);

// x[r][c] = bf16(x[r][c] + bias[c]) for r < rows.
cudaError_t VqNhwcAddBias(__nv_bfloat16* x, const float* bias, int64_t rows, int32_t channels, cudaStream_t stream);

// Emu3's temporal stack (BatchNorm folded to an affine, then swish; a conv
// bias then swish with scale null): out[r][c] = swish(in[r][c] * scale[c] +
// shift[c]), scale null meaning 1. in == out allowed.
cudaError_t VqNhwcAffineSwish(const __nv_bfloat16* in, const float* scale, const float* shift, int64_t rows,
                              int32_t channels, __nv_bfloat16* out, cudaStream_t stream);

// Emu3's SpatialNorm modulation, in place on a GroupNorm output x [images][h][w][channels]:
//   x = x * (cond[n][sy][sx][c] + cond_bias[c]) + cond[n][sy][sx][channels + c] + cond_bias[channels + c]
// then swish when asked, in fp32. cond [images][zh][zw][2 * channels] fp32 is
// conv_y | conv_b of the condition at the code resolution (biases not added);
// (sy, sx) = (y * zh / h, x * zw / w) floored: the nearest resize, which
// commutes with those 1x1 convolutions (kernels/emu3vq_kernels.h, fp32 twin).
cudaError_t VqNhwcSpatialModulate(__nv_bfloat16* x, const float* cond, const float* cond_bias, int32_t images,
                                  int32_t h, int32_t w, int32_t zh, int32_t zw, int32_t channels, bool swish,
                                  cudaStream_t stream);

// probs[r][j] = softmax(scores[r][:])[j] as bf16, rows of n floats: float max
// and exp, the sum in double, scaled by float(1 / sum) (VqSoftmaxRows' math).
cudaError_t VqSoftmaxRowsToBf16(const float* scores, int64_t rows, int32_t n, __nv_bfloat16* probs,
                                cudaStream_t stream);

// conv_out: a 3x3, pad 1 convolution of in [images][h][w][cin] (bf16) to 3
// channels, accumulated and written in fp32, planar:
//   out[o * plane_stride + p] = bias[o] + sum_{tap, i} weight_t[(tap * 3 + o) * cin + i] * in[p shifted by tap][i]
// for p = n*h*w + y*w + x, tap = ky*3 + kx (weight_t is PyTorch's [3][cin][3][3] re-laid tap-major).
// cin <= kVqConvOutMaxChannels.
cudaError_t VqNhwcConvOut3(const __nv_bfloat16* in, const float* weight_t, const float* bias, int32_t images, int32_t h,
                           int32_t w, int32_t cin, float* out, int64_t plane_stride, cudaStream_t stream);

}  // namespace argen::kernels
