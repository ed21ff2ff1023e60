// The VQGAN decoder's ResnetBlock and AttnBlock (GroupNorm, swish, convs,
// single-head spatial attention) on the fp32 machinery (fp32_vq_ops.h), for
// the GPU decoders built from them: CudaVqDecoder's fp32 path (VQ-16) and
// CudaVaeDecoder (vqgan::). One copy keeps the two launching the same kernels
// and GEMMs in the same order. Emu3's blocks normalise with SpatialNorm and
// keep their own.
//
// Activations ping-pong through three [C][N*H*W] device buffers: x the
// running one, a and b scratch; a block reads x and leaves its output in x.
// Everything is enqueued on the context's stream; nothing allocates.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "engine/vq/vq_weights.h"
#include "engine/vq_cuda/fp32_vq_ops.h"
#include "engine/vq_cuda/weight_blob.h"

namespace argen::vq {

// Device weights as float offsets into the decoder's uploaded blob.
struct BlobGroupNorm {
  int32_t channels = 0;
  size_t gamma = 0, beta = 0;
};
struct BlobResnet {
  BlobGroupNorm norm1, norm2;
  BlobConv conv1, conv2, nin;
  bool has_nin = false;
};
struct BlobAttn {
  BlobGroupNorm norm;
  BlobConv q, k, v, proj_out;
};

// The decoder's weight blob with the blocks' layouts: each method appends a
// block's tensors and returns where they sit.
class VqganWeightBlob : public WeightBlob {
 public:
  BlobGroupNorm Norm(const GroupNormWeights& n);
  BlobResnet Res(const ResnetBlockWeights& r);
  BlobAttn Attn(const AttnBlockWeights& a);
};

// What the blocks run with.
struct Fp32BlockContext {
  Fp32VqContext ops;
  const float* weights = nullptr;                                     // the device blob the Blob* offsets point into
  int32_t groups = 0;                                                 // GroupNorm's group count
  float *q = nullptr, *k = nullptr, *v = nullptr, *scores = nullptr;  // attention scratch
};

// out[cout][n*h*w] (=|+=) conv(in[cin][n*h*w]) + bias: Fp32Conv2d on blob weights.
absl::Status Fp32BlobConv(const Fp32BlockContext& ctx, const BlobConv& c, const float* in, int32_t n, int32_t h,
                          int32_t w, float* out, bool accumulate, const char* what);

// out = GroupNorm(in) (swish after when asked), eps kGroupNormEps; in == out allowed.
absl::Status Fp32GroupNorm(const Fp32BlockContext& ctx, const BlobGroupNorm& g, const float* in, int32_t n, int64_t hw,
                           float* out, bool swish, const char* what);

// x = x (or nin(x)) + conv2(swish(norm2(conv1(swish(norm1(x)))))). The result
// is built in a, then x and a swap (the old x becomes scratch): hence the references.
absl::Status Fp32ResnetBlock(const Fp32BlockContext& ctx, const BlobResnet& r, float*& x, float*& a, float* b,
                             int32_t n, int32_t h, int32_t w);

// x += proj_out(attention(q, k, v of norm(x))); a is scratch.
absl::Status Fp32AttnBlock(const Fp32BlockContext& ctx, const BlobAttn& at, float* x, float* a, int32_t n, int32_t h,
                           int32_t w);

}  // namespace argen::vq
