#include "engine/vq_cuda/bf16_emu3vq_network.h"

#include <cuda_bf16.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/bf16.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/device_buffer.h"
#include "engine/vq/group_norm.h"
#include "engine/vq_cuda/bf16_emu3vq_layout.h"
#include "engine/vq_cuda/vq_program.h"
#include "kernels/vq_nhwc_kernels.h"
#if defined(ARGEN_WITH_CUDNN)
#include "engine/vq_cuda/cudnn_convs.h"
#endif

namespace argen::vq {

#if defined(ARGEN_WITH_CUDNN)

namespace {

using bf16 = __nv_bfloat16;
using cuda::CublasStatus;
using cuda::CudaStatus;
using cuda::DeviceBuffer;
using emu3vq::Emu3VqConfig;
using emu3vq::Emu3VqWeights;

absl::Status Alloc(DeviceBuffer& buf, size_t bytes, const char* what) {
  auto b = DeviceBuffer::Allocate(std::max<size_t>(bytes, 256), absl::StrCat("bf16 Emu3 vision decoder: ", what));
  if (!b.ok()) return b.status();
  buf = std::move(*b);
  return absl::OkStatus();
}

// What a walk of the network does: size the buffers (per image, one grid of
// max_cells), list the 3x3 shapes of a grid size, or run.
enum class Mode { kMeasure, kCollect, kRun };

}  // namespace

// The weights' layout (offsets into the uploaded blobs) and the device state.
struct Bf16Emu3VqNetwork::Impl : Bf16Emu3VqLayout {
  Emu3VqConfig config;
  Bf16Emu3VqOptions options;
  int32_t max_cells = 0, chunk = 1;
  std::vector<int32_t> ladder;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;

  // Buffer needs per image (elements), from the measuring walk.
  int64_t act_elems = 0, cond_elems = 0, cond_ss_elems = 0, qkv_elems = 0, score_elems = 0, out_elems = 0;
  int64_t gn_partial_bytes = 0, gn_channels = 0;

  DeviceBuffer half, flt, act[3], cond, cond_ss, qkv, scores, probs, out, gn_partial, gn_ss, cudnn_ws;
  size_t scratch = 0;
  std::unique_ptr<CudnnConvs> convs;
  // Per planned grid size (zh, zw): (cin, cout, h, w) -> CudnnConvs shape index.
  std::map<std::pair<int32_t, int32_t>, std::map<std::array<int32_t, 4>, int32_t>> grids;

  // The walk's state.
  Mode mode = Mode::kRun;
  int32_t zh = 0, zw = 0;
  const std::map<std::array<int32_t, 4>, int32_t>* shapes = nullptr;  // kRun: the grid's
  std::vector<std::array<int32_t, 4>> collected;                      // kCollect
  std::vector<int64_t> collected_filters;
  const int32_t* codes = nullptr;
  int64_t plane = 0, out_image = 0;
  int xi = 0, ai = 1, bi = 2;  // act buffer of the residual stream and the two temporaries

  ~Impl() {
    if (stream) cudaStreamSynchronize(stream);  // nothing in flight on the buffers freed next
  }

  bool run() const { return mode == Mode::kRun; }
  bf16* A(int i) const { return i == 3 ? cond.as<bf16>() : act[i].as<bf16>(); }
  const bf16* Hw(int64_t off) const { return half.as<bf16>() + off; }
  const float* Fw(int64_t off) const { return off < 0 ? nullptr : flt.as<float>() + off; }
  void NeedAct(int64_t elems) { act_elems = std::max(act_elems, elems); }

  // out = conv3x3(in) + beta * out over n images of h x w (no bias).
  absl::Status Conv3(const Bf16Emu3Conv& c, int32_t n, int32_t h, int32_t w, int in, int o, float beta,
                     const char* what) {
    const int64_t hw = int64_t{h} * w;
    switch (mode) {
      case Mode::kMeasure:
        NeedAct(std::max(c.cin, c.cout) * hw);
        return absl::OkStatus();
      case Mode::kCollect: {
        const std::array<int32_t, 4> key{c.cin, c.cout, h, w};
        if (std::find(collected.begin(), collected.end(), key) == collected.end()) {
          collected.push_back(key);
          collected_filters.push_back(c.w);
        }
        return absl::OkStatus();
      }
      case Mode::kRun:
        break;
    }
    auto it = shapes->find({c.cin, c.cout, h, w});
    if (it == shapes->end()) return absl::InternalError(absl::StrCat(what, ": shape not planned"));
    absl::Status s =
        convs->Forward(it->second, n, A(in), Hw(c.w), A(o), beta, cudnn_ws.as(), static_cast<size_t>(cudnn_ws.bytes()));
    if (!s.ok()) return absl::Status(s.code(), absl::StrCat(what, ": ", s.message()));
    return absl::OkStatus();
  }

  // Row-major out[rows][cout] = in[rows][cin] W^T + beta * out; W [cout][cin] bf16; out bf16 or fp32.
  absl::Status Gemm(const bf16* wt, int32_t cin, int32_t cout, int64_t rows, const bf16* in, void* o, bool fp32_out,
                    float beta, const char* what) {
    if (rows > INT_MAX) return absl::InternalError(absl::StrCat(what, ": more than 2^31 rows"));
    const float alpha = 1.0f;
    return CublasStatus(
        cublasGemmEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, cout, static_cast<int>(rows), cin, &alpha, wt, CUDA_R_16BF, cin,
                     in, CUDA_R_16BF, cin, &beta, o, fp32_out ? CUDA_R_32F : CUDA_R_16BF, cout, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT),
        what);
  }

  absl::Status AddBias(int i, int64_t bias, int64_t rows, int32_t channels, const char* what) {
    if (!run()) return absl::OkStatus();
    return CudaStatus(kernels::VqNhwcAddBias(A(i), Fw(bias), rows, channels, stream), what);
  }

  // out = GroupNorm(in + in_bias) * (conv_y(zq') + b_y) + conv_b(zq') + b_b, swish when asked; in == out allowed.
  absl::Status SpatialNorm(const Bf16Emu3SpatialNorm& sn, int32_t n, int32_t h, int32_t w, int in, int64_t in_bias,
                           int o, bool swish, const char* what) {
    const int64_t hw = int64_t{h} * w;
    const int32_t c = sn.channels;
    if (mode == Mode::kMeasure) {
      NeedAct(c * hw);
      gn_partial_bytes = std::max(gn_partial_bytes, kernels::VqGroupNormPartialBytes(1, hw, c));
      gn_channels = std::max<int64_t>(gn_channels, c);
      cond_ss_elems = std::max<int64_t>(cond_ss_elems, int64_t{2} * c * zh * zw);
      return absl::OkStatus();
    }
    if (!run()) return absl::OkStatus();
    ARGEN_STATUS_RETURN(CudaStatus(kernels::VqNhwcGroupNorm(A(in), Fw(in_bias), Fw(sn.gamma), Fw(sn.beta), n, hw, c,
                                                            emu3vq::kGroupNormGroups, kGroupNormEps, /*swish=*/false,
                                                            gn_partial.as<double2>(), gn_ss.as<float2>(), A(o), stream),
                                   what));
    ARGEN_STATUS_RETURN(Gemm(Hw(sn.cond_w), zp, 2 * c, int64_t{n} * zh * zw, cond.as<bf16>(), cond_ss.as(),
                             /*fp32_out=*/true, 0.0f, what));
    return CudaStatus(
        kernels::VqNhwcSpatialModulate(A(o), cond_ss.as<float>(), Fw(sn.cond_b), n, h, w, zh, zw, c, swish, stream),
        what);
  }

  absl::Status Resnet(const Bf16Emu3Res& r, int32_t n, int32_t h, int32_t w) {
    const int64_t rows = int64_t{n} * h * w;
    ARGEN_STATUS_RETURN(SpatialNorm(r.norm1, n, h, w, xi, -1, ai, true, "resblock norm1"));
    ARGEN_STATUS_RETURN(Conv3(r.conv1, n, h, w, ai, bi, 0.0f, "resblock conv1"));
    // conv1's bias enters norm2 as its input bias (GroupNorm's statistics and output).
    ARGEN_STATUS_RETURN(SpatialNorm(r.norm2, n, h, w, bi, r.conv1.b, ai, true, "resblock norm2"));
    if (!r.has_nin) {
      ARGEN_STATUS_RETURN(Conv3(r.conv2, n, h, w, ai, xi, 1.0f, "resblock conv2"));  // x += conv2(a)
      return AddBias(xi, r.out_bias, rows, r.conv2.cout, "resblock bias");
    }
    if (mode == Mode::kMeasure) NeedAct(int64_t{r.nin.cout} * h * w);
    if (run()) {
      ARGEN_STATUS_RETURN(
          Gemm(Hw(r.nin.w), r.nin.cin, r.nin.cout, rows, A(xi), A(bi), false, 0.0f, "resblock nin_shortcut"));
    }
    ARGEN_STATUS_RETURN(Conv3(r.conv2, n, h, w, ai, bi, 1.0f, "resblock conv2"));  // b = nin(x) + conv2(a)
    ARGEN_STATUS_RETURN(AddBias(bi, r.out_bias, rows, r.conv2.cout, "resblock bias"));
    std::swap(xi, bi);
    return absl::OkStatus();
  }

  absl::Status Attn(const Bf16Emu3Attn& at, int32_t n, int32_t h, int32_t w) {
    const int32_t c = at.channels;
    const int64_t cells = int64_t{h} * w;
    const int64_t rows = n * cells;
    ARGEN_STATUS_RETURN(SpatialNorm(at.norm, n, h, w, xi, -1, ai, false, "attn norm"));
    if (mode == Mode::kMeasure) {
      qkv_elems = std::max(qkv_elems, 3 * c * cells);
      score_elems = std::max(score_elems, cells * cells);
      return absl::OkStatus();
    }
    if (!run()) return absl::OkStatus();
    if (cells > INT_MAX / 3) return absl::InternalError("attention: too many cells");
    const int32_t m = static_cast<int32_t>(cells);
    bf16* qkvp = qkv.as<bf16>();
    ARGEN_STATUS_RETURN(Gemm(Hw(at.wqkv), c, 3 * c, rows, A(ai), qkvp, false, 0.0f, "attention q|k|v"));
    ARGEN_STATUS_RETURN(
        CudaStatus(kernels::VqNhwcAddBias(qkvp, Fw(at.bqkv), rows, 3 * c, stream), "attention q|k|v bias"));
    // Per image, row-major scores[i][j] = q_i . k_j / sqrt(c); column-major S' = K * Q^T.
    const float scale = 1.0f / std::sqrt(static_cast<float>(c)), zero = 0.0f, one = 1.0f;
    const long long qkv_stride = static_cast<long long>(cells) * 3 * c;
    ARGEN_STATUS_RETURN(CublasStatus(
        cublasGemmStridedBatchedEx(cublas, CUBLAS_OP_T, CUBLAS_OP_N, m, m, c, &scale, qkvp + c, CUDA_R_16BF, 3 * c,
                                   qkv_stride, qkvp, CUDA_R_16BF, 3 * c, qkv_stride, &zero, scores.as(), CUDA_R_32F, m,
                                   static_cast<long long>(cells) * cells, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "attention scores"));
    ARGEN_STATUS_RETURN(
        CudaStatus(kernels::VqSoftmaxRowsToBf16(scores.as<float>(), rows, m, probs.as<bf16>(), stream), "softmax"));
    // out[i][:] = sum_j p[i][j] v_j: column-major O' [c x cells] = V' [c x cells] * P' [cells x cells].
    ARGEN_STATUS_RETURN(CublasStatus(
        cublasGemmStridedBatchedEx(cublas, CUBLAS_OP_N, CUBLAS_OP_N, c, m, m, &one, qkvp + 2 * c, CUDA_R_16BF, 3 * c,
                                   qkv_stride, probs.as(), CUDA_R_16BF, m, static_cast<long long>(cells) * cells, &zero,
                                   A(bi), CUDA_R_16BF, c, static_cast<long long>(cells) * c, n, CUBLAS_COMPUTE_32F,
                                   CUBLAS_GEMM_DEFAULT),
        "attention values"));
    ARGEN_STATUS_RETURN(Gemm(Hw(at.wproj), c, c, rows, A(bi), A(xi), false, 1.0f, "attention proj_out"));  // x += ...
    return AddBias(xi, at.bproj, rows, c, "attention proj_out bias");
  }

  // The temporal stack in place on buffer io [n][zh][zw][zp] (t1, t2 scratch).
  absl::Status Temporal(int io, int t1, int t2, int32_t n) {
    const int64_t rows = int64_t{n} * zh * zw;
    for (const Bf16Emu3TemporalRes& r : time_res) {
      if (run()) {
        ARGEN_STATUS_RETURN(
            CudaStatus(kernels::VqNhwcAffineSwish(A(io), Fw(r.norm1.scale), Fw(r.norm1.shift), rows, zp, A(t1), stream),
                       "temporal norm1"));
      }
      ARGEN_STATUS_RETURN(Conv3(r.conv1, n, zh, zw, t1, t2, 0.0f, "temporal conv1"));
      if (run()) {
        ARGEN_STATUS_RETURN(
            CudaStatus(kernels::VqNhwcAffineSwish(A(t2), Fw(r.norm2.scale), Fw(r.norm2.shift), rows, zp, A(t1), stream),
                       "temporal norm2"));
      }
      ARGEN_STATUS_RETURN(Conv3(r.conv2, n, zh, zw, t1, io, 1.0f, "temporal conv2"));  // io += conv2(t1)
      ARGEN_STATUS_RETURN(AddBias(io, r.conv2.b, rows, zp, "temporal conv2 bias"));
    }
    for (const Bf16Emu3Conv& c : time_conv) {
      ARGEN_STATUS_RETURN(Conv3(c, n, zh, zw, io, t1, 0.0f, "temporal upsample conv"));
      if (run()) {  // io = swish(t1 + bias)
        ARGEN_STATUS_RETURN(
            CudaStatus(kernels::VqNhwcAffineSwish(A(t1), nullptr, Fw(c.b), rows, zp, A(io), stream), "temporal swish"));
      }
    }
    return absl::OkStatus();
  }

  absl::Status Lookup(int64_t table, int32_t n, int o, const char* what) {
    if (!run()) return absl::OkStatus();
    return CudaStatus(
        kernels::VqNhwcLookup(Hw(table), config.codebook_size, zp, codes, int64_t{n} * zh * zw, A(o), stream), what);
  }

  // The network on n grids of zh x zw codes (codes, out_image and plane set by the caller).
  absl::Status Network(int32_t n) {
    const int64_t cells = int64_t{zh} * zw;
    xi = 0;
    ai = 1;
    bi = 2;
    if (mode == Mode::kMeasure) {
      NeedAct(zp * cells);
      cond_elems = std::max<int64_t>(cond_elems, zp * cells);
    }
    // The condition (codebook vectors) in the condition buffer, the latents (post_quant_conv folded) in b;
    // both through the temporal stack, as the reference runs them as one batch.
    ARGEN_STATUS_RETURN(Lookup(cond_table, n, kCond, "condition lookup"));
    ARGEN_STATUS_RETURN(Lookup(latent_table, n, bi, "latent lookup"));
    ARGEN_STATUS_RETURN(Temporal(bi, ai, xi, n));
    ARGEN_STATUS_RETURN(Temporal(kCond, ai, xi, n));
    ARGEN_STATUS_RETURN(Conv3(conv_in, n, zh, zw, bi, xi, 0.0f, "conv_in"));
    ARGEN_STATUS_RETURN(AddBias(xi, conv_in.b, n * cells, conv_in.cout, "conv_in bias"));
    ARGEN_STATUS_RETURN(Resnet(mid_block_1, n, zh, zw));
    ARGEN_STATUS_RETURN(Attn(mid_attn, n, zh, zw));
    ARGEN_STATUS_RETURN(Resnet(mid_block_2, n, zh, zw));
    int32_t h = zh, w = zw;
    for (int32_t level = config.levels() - 1; level >= 0; --level) {
      const Bf16Emu3Level& l = up[level];
      for (size_t i = 0; i < l.block.size(); ++i) {
        ARGEN_STATUS_RETURN(Resnet(l.block[i], n, h, w));
        if (!l.attn.empty()) ARGEN_STATUS_RETURN(Attn(l.attn[i], n, h, w));
      }
      if (l.has_upsample) {
        const int32_t c = l.upsample.cin;
        if (mode == Mode::kMeasure) NeedAct(int64_t{c} * 4 * h * w);
        if (run()) {
          ARGEN_STATUS_RETURN(
              CudaStatus(kernels::VqNhwcUpsample2x(A(xi), nullptr, n, h, w, c, A(ai), stream), "upsample"));
        }
        h *= 2;
        w *= 2;
        ARGEN_STATUS_RETURN(Conv3(l.upsample, n, h, w, ai, xi, 0.0f, "upsample conv"));
        ARGEN_STATUS_RETURN(AddBias(xi, l.upsample.b, int64_t{n} * h * w, l.upsample.cout, "upsample conv bias"));
      }
    }
    ARGEN_STATUS_RETURN(SpatialNorm(norm_out, n, h, w, xi, -1, ai, true, "norm_out"));
    const int64_t hw = int64_t{h} * w;
    if (mode == Mode::kMeasure) out_elems = std::max(out_elems, 3 * hw);
    if (!run()) return absl::OkStatus();
    return CudaStatus(kernels::VqNhwcConvOut3(A(ai), Fw(conv_out_w), Fw(conv_out_b), n, h, w, conv_out_cin,
                                              out.as<float>() + out_image * hw, plane, stream),
                      "conv_out");
  }

  static constexpr int kCond = 3;  // A(kCond): the condition buffer
};

Bf16Emu3VqNetwork::Bf16Emu3VqNetwork(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Bf16Emu3VqNetwork::~Bf16Emu3VqNetwork() = default;

absl::StatusOr<std::unique_ptr<Bf16Emu3VqNetwork>> Bf16Emu3VqNetwork::Create(
    const Emu3VqWeights& weights, const Emu3VqConfig& config, int32_t max_cells, const Bf16Emu3VqOptions& options,
    cudaStream_t stream, cublasHandle_t cublas) {
  if (absl::Status s = emu3vq::ValidateEmu3VqConfig(config, "Emu3 vision tokenizer config"); !s.ok()) return s;
  if (max_cells <= 0) return absl::InvalidArgumentError("bf16 Emu3 path: max_cells must be positive");
  if (options.max_images_per_chunk < 1 || options.workspace_bytes <= 0 || options.cudnn_workspace_bytes < 0)
    return absl::InvalidArgumentError("bf16 Emu3 path: bad options (chunk, workspace_bytes, cudnn_workspace_bytes)");
  absl::StatusOr<Bf16Emu3VqLayout> layout = LayOutBf16Emu3Vq(weights, config);
  if (!layout.ok()) return layout.status();
  auto m = std::make_unique<Impl>();
  static_cast<Bf16Emu3VqLayout&>(*m) = *std::move(layout);
  m->config = config;
  m->options = options;
  m->max_cells = max_cells;
  m->stream = stream;
  m->cublas = cublas;

  // Per-image needs at the largest grid (only products of the sides matter).
  m->mode = Mode::kMeasure;
  m->zh = 1;
  m->zw = max_cells;
  ARGEN_STATUS_RETURN(m->Network(1));
  m->mode = Mode::kRun;
  const int64_t cells = max_cells;
  const int64_t per_image = 3 * m->act_elems * 2 + m->cond_elems * 2 + m->cond_ss_elems * 4 + m->qkv_elems * 2 +
                            m->score_elems * (4 + 2) + m->out_elems * 4 + m->gn_partial_bytes + m->gn_channels * 8 +
                            cells * 4;
  const int64_t cudnn_limit = std::min(options.cudnn_workspace_bytes, options.workspace_bytes / 4);
  const int64_t budget = options.workspace_bytes - cudnn_limit;
  int64_t chunk = std::min<int64_t>(options.max_images_per_chunk, budget / per_image);
  // cuDNN's and cuBLAS's dimensions are ints; grids take at most 65535 images.
  chunk = std::min<int64_t>({chunk, INT_MAX / m->act_elems, INT_MAX / std::max<int64_t>(1, m->score_elems), 65535});
  if (chunk < 1) {
    return absl::ResourceExhaustedError(absl::StrCat("bf16 Emu3 path: workspace_bytes ", options.workspace_bytes,
                                                     " is too small: a grid of ", max_cells, " codes needs ",
                                                     per_image + cudnn_limit, " bytes"));
  }
  m->chunk = static_cast<int32_t>(chunk);
  m->ladder = VqLadder(m->chunk);
  const size_t n = static_cast<size_t>(chunk);
  ARGEN_STATUS_RETURN(Alloc(m->half, m->half_blob.size() * 2, "half weights"));
  ARGEN_STATUS_RETURN(Alloc(m->flt, m->float_blob.size() * 4, "float weights"));
  for (int i = 0; i < 3; ++i) ARGEN_STATUS_RETURN(Alloc(m->act[i], n * m->act_elems * 2, "activation"));
  ARGEN_STATUS_RETURN(Alloc(m->cond, n * m->cond_elems * 2, "condition"));
  ARGEN_STATUS_RETURN(Alloc(m->cond_ss, n * m->cond_ss_elems * 4, "spatial norm scale|shift"));
  ARGEN_STATUS_RETURN(Alloc(m->qkv, n * m->qkv_elems * 2, "attention q|k|v"));
  ARGEN_STATUS_RETURN(Alloc(m->scores, n * m->score_elems * 4, "attention scores"));
  ARGEN_STATUS_RETURN(Alloc(m->probs, n * m->score_elems * 2, "attention probabilities"));
  ARGEN_STATUS_RETURN(Alloc(m->out, n * m->out_elems * 4, "output pixels"));
  ARGEN_STATUS_RETURN(Alloc(m->gn_partial, n * m->gn_partial_bytes, "group norm partial sums"));
  ARGEN_STATUS_RETURN(Alloc(m->gn_ss, n * m->gn_channels * 8, "group norm scale/shift"));
  ARGEN_STATUS_RETURN(Alloc(m->cudnn_ws, static_cast<size_t>(cudnn_limit), "cuDNN workspace"));
  ARGEN_CUDA_RETURN(
      cudaMemcpyAsync(m->half.as(), m->half_blob.data(), m->half_blob.size() * 2, cudaMemcpyHostToDevice, stream),
      "bf16 Emu3 path: upload weights");
  ARGEN_CUDA_RETURN(
      cudaMemcpyAsync(m->flt.as(), m->float_blob.data(), m->float_blob.size() * 4, cudaMemcpyHostToDevice, stream),
      "bf16 Emu3 path: upload weights");
  // Finite data for cuDNN's algorithm search.
  for (int i = 0; i < 3; ++i)
    ARGEN_CUDA_RETURN(cudaMemsetAsync(m->act[i].as(), 0, m->act[i].bytes(), stream), "bf16 Emu3 path: clear");
  ARGEN_CUDA_RETURN(cudaStreamSynchronize(stream), "bf16 Emu3 path: upload weights");
  std::vector<uint16_t>().swap(m->half_blob);  // uploaded: the host copies go
  std::vector<float>().swap(m->float_blob);
  m->scratch = 3 * m->act[0].bytes() + m->cond.bytes() + m->cond_ss.bytes() + m->qkv.bytes() + m->scores.bytes() +
               m->probs.bytes() + m->out.bytes() + m->gn_partial.bytes() + m->gn_ss.bytes() + m->cudnn_ws.bytes();
  auto convs = CudnnConvs::Create(stream);
  if (!convs.ok()) return convs.status();
  m->convs = std::move(*convs);
  return std::unique_ptr<Bf16Emu3VqNetwork>(new Bf16Emu3VqNetwork(std::move(m)));
}

absl::Status Bf16Emu3VqNetwork::PlanGrid(int32_t zh, int32_t zw) {
  Impl& m = *impl_;
  if (zh <= 0 || zw <= 0 || int64_t{zh} * zw > m.max_cells)
    return absl::InvalidArgumentError(absl::StrCat("bf16 Emu3 path: grid ", zh, "x", zw, " exceeds max_cells"));
  if (m.grids.count({zh, zw})) return absl::OkStatus();
  m.mode = Mode::kCollect;
  m.zh = zh;
  m.zw = zw;
  m.collected.clear();
  m.collected_filters.clear();
  absl::Status walked = m.Network(1);
  m.mode = Mode::kRun;
  ARGEN_STATUS_RETURN(walked);
  std::vector<CudnnConvShape> shapes;
  std::vector<const void*> filters;
  for (size_t i = 0; i < m.collected.size(); ++i) {
    const auto& k = m.collected[i];
    shapes.push_back({k[0], k[1], k[2], k[3]});
    filters.push_back(m.Hw(m.collected_filters[i]));
  }
  const int32_t first = m.convs->shape_count();
  if (absl::Status s = m.convs->Plan(shapes, filters, m.ladder, m.options.benchmark_algorithms, m.act[0].as(),
                                     m.act[1].as(), m.cudnn_ws.as(), m.cudnn_ws.bytes());
      !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("bf16 Emu3 path: planning grids of ", zh, "x", zw, ": ", s.message()));
  }
  std::map<std::array<int32_t, 4>, int32_t>& index = m.grids[{zh, zw}];
  for (size_t i = 0; i < m.collected.size(); ++i) index[m.collected[i]] = first + static_cast<int32_t>(i);
  return absl::OkStatus();
}

absl::Status Bf16Emu3VqNetwork::Run(const int32_t* codes, int32_t n, int32_t zh, int32_t zw) {
  Impl& m = *impl_;
  if (n < 1 || n > m.chunk) return absl::InternalError(absl::StrCat("bf16 Emu3 path: ", n, " grids, chunk ", m.chunk));
  ARGEN_STATUS_RETURN(PlanGrid(zh, zw));
  m.mode = Mode::kRun;
  m.zh = zh;
  m.zw = zw;
  m.shapes = &m.grids.at({zh, zw});
  const int64_t cells = int64_t{zh} * zw;
  const int64_t f = m.config.spatial_factor();
  m.plane = int64_t{n} * cells * f * f;
  for (auto [first, size] : VqPieces(n, m.ladder)) {
    m.codes = codes + first * cells;
    m.out_image = first;
    ARGEN_STATUS_RETURN(m.Network(size));
  }
  return absl::OkStatus();
}

const float* Bf16Emu3VqNetwork::output() const { return impl_->out.as<float>(); }
int32_t Bf16Emu3VqNetwork::chunk() const { return impl_->chunk; }
size_t Bf16Emu3VqNetwork::scratch_bytes() const { return impl_->scratch; }
size_t Bf16Emu3VqNetwork::weight_bytes() const { return impl_->half.bytes() + impl_->flt.bytes(); }
std::string Bf16Emu3VqNetwork::description() const {
  const Impl& m = *impl_;
  std::string ladder;
  for (int32_t s : m.ladder) absl::StrAppend(&ladder, ladder.empty() ? "" : ",", s);
  return absl::StrCat("bf16 NHWC: chunk ", m.chunk, " (ladder ", ladder, ") of up to ", m.max_cells,
                      " codes, latent channels ", m.config.z_channels, " padded to ", m.zp, ", scratch ",
                      m.scratch >> 20, " MiB, weights ", weight_bytes() >> 20, " MiB; grid sizes planned ",
                      m.grids.size(), "; ", m.convs->Describe());
}

#else  // !ARGEN_WITH_CUDNN

struct Bf16Emu3VqNetwork::Impl {};
Bf16Emu3VqNetwork::Bf16Emu3VqNetwork(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Bf16Emu3VqNetwork::~Bf16Emu3VqNetwork() = default;
absl::StatusOr<std::unique_ptr<Bf16Emu3VqNetwork>> Bf16Emu3VqNetwork::Create(const emu3vq::Emu3VqWeights&,
                                                                             const emu3vq::Emu3VqConfig&, int32_t,
                                                                             const Bf16Emu3VqOptions&, cudaStream_t,
                                                                             cublasHandle_t) {
  return absl::FailedPreconditionError(
      "bf16 Emu3 path: this build has no cuDNN (cudnn.h / libcudnn not found at configure)");
}
absl::Status Bf16Emu3VqNetwork::PlanGrid(int32_t, int32_t) { return absl::FailedPreconditionError("no cuDNN"); }
absl::Status Bf16Emu3VqNetwork::Run(const int32_t*, int32_t, int32_t, int32_t) {
  return absl::FailedPreconditionError("no cuDNN");
}
const float* Bf16Emu3VqNetwork::output() const { return nullptr; }
int32_t Bf16Emu3VqNetwork::chunk() const { return 0; }
size_t Bf16Emu3VqNetwork::scratch_bytes() const { return 0; }
size_t Bf16Emu3VqNetwork::weight_bytes() const { return 0; }
std::string Bf16Emu3VqNetwork::description() const { return "bf16 Emu3 path: no cuDNN"; }

#endif

}  // namespace argen::vq
