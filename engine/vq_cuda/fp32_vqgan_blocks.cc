#include "engine/vq_cuda/fp32_vqgan_blocks.h"

#include <utility>

#include "engine/cuda/cuda_status.h"
#include "engine/vq/group_norm.h"
#include "kernels/vq_kernels.h"

namespace argen::vq {

BlobGroupNorm VqganWeightBlob::Norm(const GroupNormWeights& n) { return {n.channels, Add(n.gamma), Add(n.beta)}; }

BlobResnet VqganWeightBlob::Res(const ResnetBlockWeights& r) {
  BlobResnet d;
  d.norm1 = Norm(r.norm1);
  d.conv1 = Conv(r.conv1);
  d.norm2 = Norm(r.norm2);
  d.conv2 = Conv(r.conv2);
  if (r.nin_shortcut) {
    d.has_nin = true;
    d.nin = Conv(*r.nin_shortcut);
  }
  return d;
}

BlobAttn VqganWeightBlob::Attn(const AttnBlockWeights& a) {
  // A braced list evaluates left to right: the blob order is norm, q, k, v, proj_out.
  return {Norm(a.norm), Conv(a.q), Conv(a.k), Conv(a.v), Conv(a.proj_out)};
}

absl::Status Fp32BlobConv(const Fp32BlockContext& ctx, const BlobConv& c, const float* in, int32_t n, int32_t h,
                          int32_t w, float* out, bool accumulate, const char* what) {
  return Fp32Conv2d(ctx.ops, {c.cin, c.cout, c.kernel, ctx.weights + c.w, ctx.weights + c.b}, in, n, h, w, out,
                    accumulate, what);
}

absl::Status Fp32GroupNorm(const Fp32BlockContext& ctx, const BlobGroupNorm& g, const float* in, int32_t n, int64_t hw,
                           float* out, bool swish, const char* what) {
  return cuda::CudaStatus(kernels::VqGroupNorm(in, ctx.weights + g.gamma, ctx.weights + g.beta, g.channels, ctx.groups,
                                               n, hw, kGroupNormEps, swish, out, ctx.ops.stream),
                          what);
}

absl::Status Fp32ResnetBlock(const Fp32BlockContext& ctx, const BlobResnet& r, float*& x, float*& a, float* b,
                             int32_t n, int32_t h, int32_t w) {
  const int64_t hw = static_cast<int64_t>(h) * w;
  ARGEN_STATUS_RETURN(Fp32GroupNorm(ctx, r.norm1, x, n, hw, a, true, "resblock norm1"));
  ARGEN_STATUS_RETURN(Fp32BlobConv(ctx, r.conv1, a, n, h, w, b, false, "resblock conv1"));
  ARGEN_STATUS_RETURN(Fp32GroupNorm(ctx, r.norm2, b, n, hw, b, true, "resblock norm2"));
  ARGEN_STATUS_RETURN(Fp32BlobConv(ctx, r.conv2, b, n, h, w, a, false, "resblock conv2"));
  if (r.has_nin) {
    ARGEN_STATUS_RETURN(Fp32BlobConv(ctx, r.nin, x, n, h, w, a, true, "resblock nin_shortcut"));
  } else {
    ARGEN_STATUS_RETURN(cuda::CudaStatus(
        kernels::VqAddInPlace(a, x, static_cast<int64_t>(r.conv2.cout) * n * hw, ctx.ops.stream), "residual"));
  }
  std::swap(x, a);
  return absl::OkStatus();
}

absl::Status Fp32AttnBlock(const Fp32BlockContext& ctx, const BlobAttn& at, float* x, float* a, int32_t n, int32_t h,
                           int32_t w) {
  const int64_t hw = static_cast<int64_t>(h) * w;
  ARGEN_STATUS_RETURN(Fp32GroupNorm(ctx, at.norm, x, n, hw, a, false, "attn norm"));
  ARGEN_STATUS_RETURN(Fp32BlobConv(ctx, at.q, a, n, h, w, ctx.q, false, "attn q"));
  ARGEN_STATUS_RETURN(Fp32BlobConv(ctx, at.k, a, n, h, w, ctx.k, false, "attn k"));
  ARGEN_STATUS_RETURN(Fp32BlobConv(ctx, at.v, a, n, h, w, ctx.v, false, "attn v"));
  ARGEN_STATUS_RETURN(Fp32SpatialAttention(ctx.ops, ctx.q, ctx.k, ctx.v, at.q.cout, n, hw, ctx.scores, a));
  return Fp32BlobConv(ctx, at.proj_out, a, n, h, w, x, true, "attn proj_out");
}

}  // namespace argen::vq
