// The VQ-16 decoder as a program of primitive operations on channels-last
// (NHWC) bf16 activations: what the GPU bf16 path runs (bf16_vq_network.h:
// cuDNN convolutions, cuBLAS GEMMs, kernels/vq_nhwc_kernels.h) and what a
// host emulation replays without a GPU (vq_program_host.h), so the program's
// layouts, GEMM arguments and bias folding are checked against the CPU decoder
// on every machine. Host-only code: no CUDA here.
//
// Built once from the weights:
// - weights re-laid for NHWC: 3x3 filters KRSC [cout][3][3][cin] bf16, 1x1
//   convs [cout][cin] bf16 (q, k, v fused into one [3c][c]), conv_out as
//   [9 taps][3][cin] floats; post_quant_conv folded into the codebook
//   (table[id] = W_pq codebook[id] + b_pq in double, then bf16), so the
//   lookup gives z_channels directly;
// - the ops in execution order, each naming its activation buffers (three
//   interchangeable ones, each the size of the largest activation).
//
// Pending biases: no 3x3 convolution adds its bias. The residual stream x is
// stored without the biases that reached it; their per-channel sum (the
// "pending bias", tracked here in double) is added by x's consumers on the
// fly: GroupNorm (statistics and output) and the upsample take it as an input
// bias, a residual convolution accumulates into x (beta = 1) and adds its
// bias to the pending one, a 1x1 shortcut maps it exactly (W pb + b), and the
// attention's proj_out accumulates like a residual convolution. So no pass
// over an activation is spent on a bias. (Zero padding keeps this from being
// applied to a 3x3 convolution's input: those are always GroupNorm or
// upsample outputs, which carry no pending bias.)
//
// Errors (a layout the bf16 path cannot run: a channel count not a multiple
// of 8, conv_out wider than the kernel takes) are FailedPrecondition naming
// the layer; callers fall back to fp32.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/bf16.h"
#include "engine/vq/vq_config.h"
#include "engine/vq/vq_weights.h"

namespace argen::vq {

// Limits of the device kernels (kernels/vq_nhwc_kernels.h asserts the same values).
inline constexpr int32_t kVqNhwcMaxGroupNormChannels = 2048;
inline constexpr int32_t kVqNhwcMaxConvOutChannels = 448;

// Where an operand lives. Element types: bf16 for the activations, q|k|v,
// probabilities and the half weights; float for scores, float weights and output.
enum class VqSpace : uint8_t {
  kNone,
  kAct0,
  kAct1,
  kAct2,
  kQkv,           // attention q | k | v, [rows][3c]
  kScores,        // attention scores, fp32 [n][cells][cells]
  kProbs,         // attention probabilities, bf16 [n][cells][cells]
  kHalfWeights,   // bf16 weight blob
  kFloatWeights,  // float blob: biases, GroupNorm affine, conv_out
  kOutput,        // fp32 planar pixels [3][plane_stride]
};

struct VqPtr {
  VqSpace space = VqSpace::kNone;
  int64_t offset = 0;  // in elements of the space's type
  bool valid() const { return space != VqSpace::kNone; }
};

inline VqPtr ActPtr(int buffer, int64_t offset = 0) {
  return {static_cast<VqSpace>(static_cast<int>(VqSpace::kAct0) + buffer), offset};
}

// A GEMM with cuBLAS's column-major semantics (cublasGemmStridedBatchedEx):
// C[i] = alpha * op(A[i]) op(B[i]) + beta * C[i], i < batch; A and B bf16,
// C bf16 or fp32 by its space; fp32 accumulation.
struct VqGemm {
  bool trans_a = false, trans_b = false;
  int32_t m = 0, n = 0, k = 0;
  float alpha = 1.0f, beta = 0.0f;
  VqPtr a, b, c;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;
  int32_t batch = 1;
  const char* what = "";
};

// A 3x3, stride 1, pad 1 convolution shape (NHWC in/out, KRSC filter).
struct VqConvShape {
  int32_t cin = 0, cout = 0, h = 0, w = 0;
  int64_t example_weight = 0;  // half-blob offset of one filter of this shape (algorithm search)
  bool operator==(const VqConvShape& o) const { return cin == o.cin && cout == o.cout && h == o.h && w == o.w; }
};

// GroupNorm(+swish) over NHWC x + in_bias (in_bias optional: the pending bias).
struct VqGroupNormArgs {
  VqPtr in, in_bias, gamma, beta, out;
  int32_t images = 0, channels = 0, groups = 0;
  int64_t hw = 0;
  float eps = 0;
  bool swish = false;
};

// The primitive operations; the GPU and the host emulation implement them.
class VqPrimitives {
 public:
  virtual ~VqPrimitives() = default;
  // out[i][c] = table[tokens[token_offset + i]][c] for i < count (the executor's tokens).
  virtual absl::Status Lookup(VqPtr table, int32_t table_rows, int32_t dim, int64_t token_offset, int64_t count,
                              VqPtr out) = 0;
  // out = conv3x3(in) + beta * out over n images (no bias); `shape` is program.conv_shapes()[shape_index].
  virtual absl::Status Conv3x3(int32_t shape_index, const VqConvShape& shape, int32_t n, VqPtr in, VqPtr weight,
                               VqPtr out, float beta) = 0;
  virtual absl::Status Gemm(const VqGemm& g) = 0;
  virtual absl::Status GroupNorm(const VqGroupNormArgs& a) = 0;
  // out[n][2y+dy][2x+dx][c] = in[n][y][x][c] + bias[c] (bias optional).
  virtual absl::Status Upsample2x(VqPtr in, VqPtr bias, int32_t n, int32_t h, int32_t w, int32_t channels,
                                  VqPtr out) = 0;
  // x[r][c] += bias[c].
  virtual absl::Status AddBias(VqPtr x, VqPtr bias, int64_t rows, int32_t channels) = 0;
  // probs[r][:] = softmax(scores[r][:]) for rows of n.
  virtual absl::Status SoftmaxToBf16(VqPtr scores, int64_t rows, int32_t n, VqPtr probs) = 0;
  // out[o * plane_stride + p] = bias[o] + conv3x3(in)[p][o], o < 3, p < n*h*w (fp32).
  virtual absl::Status ConvOut(VqPtr in, VqPtr weight_t, VqPtr bias, int32_t n, int32_t h, int32_t w, int32_t cin,
                               VqPtr out, int64_t plane_stride) = 0;
};

enum class VqOpKind : uint8_t { kLookup, kConv3x3, kLinear, kGroupNorm, kUpsample, kAttention, kConvOut };

struct VqOp {
  VqOpKind kind = VqOpKind::kLookup;
  std::string what;
  int in = 0, out = 0, tmp = 0;             // activation buffers 0..2
  int32_t cin = 0, cout = 0, h = 0, w = 0;  // at the op's input resolution
  int64_t weight = -1, weight2 = -1;        // half blob (attention: qkv, proj_out)
  int64_t bias = -1;                        // float blob: input bias (GroupNorm, upsample), q|k|v bias, conv_out bias
  int64_t gamma = -1, beta = -1;            // float blob (GroupNorm)
  bool swish = false;
  float accumulate = 0.0f;  // beta of a convolution / linear / proj_out
  int32_t shape = -1;       // conv3x3: index into conv_shapes()
};

class VqProgram {
 public:
  // keep_exact_weights: also keep the half weights unrounded (half_weights_exact(),
  // same offsets), for the host emulation's fp32 mode.
  static absl::StatusOr<VqProgram> Build(const VqDecoderWeights& weights, const vq::Vq16Config& config,
                                         bool keep_exact_weights = false);

  const std::vector<VqOp>& ops() const { return ops_; }
  const std::vector<VqConvShape>& conv_shapes() const { return shapes_; }
  const std::vector<uint16_t>& half_weights() const { return half_; }  // bf16 bits
  const std::vector<float>& float_weights() const { return float_; }
  const std::vector<float>& half_weights_exact() const { return half_exact_; }  // empty unless kept

  // Elements per image of each buffer space.
  int64_t act_elems() const { return act_elems_; }
  int64_t qkv_elems() const { return qkv_elems_; }
  int64_t score_elems() const { return score_elems_; }
  int32_t cells() const { return cells_; }    // token_grid^2
  int64_t pixels() const { return pixels_; }  // image_size^2
  int32_t image_size() const { return image_size_; }

  // Runs the program on n images (tokens [token_offset, token_offset + n*cells)
  // of the executor), writing pixels at image out_image of the fp32 planar output.
  // on_op (optional): called before op i is issued and with ops().size() after the last (profiling).
  absl::Status Run(VqPrimitives& prims, int32_t n, int64_t token_offset, int64_t out_image, int64_t plane_stride,
                   const std::function<void(size_t)>& on_op = {}) const;

 private:
  friend class VqProgramBuilder;
  std::vector<VqOp> ops_;
  std::vector<VqConvShape> shapes_;
  std::vector<uint16_t> half_;
  std::vector<float> float_;
  std::vector<float> half_exact_;
  int64_t act_elems_ = 0, qkv_elems_ = 0, score_elems_ = 0;
  int32_t cells_ = 0, codebook_rows_ = 0, table_dim_ = 0, num_groups_ = 0;
  int64_t pixels_ = 0, table_ = 0;
  int32_t image_size_ = 0;
};

// Float -> bf16 bits, round to nearest even (NaN stays NaN); and back (common/bf16.h).
using ::argen::Bf16BitsToFloat;
using ::argen::FloatToBf16Bits;

// Batch sizes the bf16 path keeps algorithms for: 1, 2, 4, ... below chunk, and chunk.
std::vector<int32_t> VqLadder(int32_t chunk);
// Splits n images into ladder-sized pieces, largest first: (first image, size).
std::vector<std::pair<int32_t, int32_t>> VqPieces(int32_t n, const std::vector<int32_t>& ladder);

}  // namespace argen::vq
