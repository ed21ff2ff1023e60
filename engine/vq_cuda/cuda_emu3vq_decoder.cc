#include "engine/vq_cuda/cuda_emu3vq_decoder.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/device_buffer.h"
#include "engine/vq/group_norm.h"
#include "engine/vq_cuda/bf16_emu3vq_network.h"
#include "engine/vq_cuda/fp32_vq_ops.h"
#include "engine/vq_cuda/side_cublas_stream.h"
#include "engine/vq_cuda/weight_blob.h"
#include "kernels/emu3vq_kernels.h"
#include "kernels/vq_kernels.h"

namespace argen::vq {
namespace {

using cuda::CudaStatus;
using cuda::DeviceBuffer;
using cuda::PinnedBuffer;
using emu3vq::Emu3VqConfig;
using emu3vq::Emu3VqWeights;

constexpr int32_t kMaxChunkImages = 4096;

// Device weights as offsets (floats) into the one uploaded blob.
using DConv = BlobConv;
struct DAffine {
  int32_t channels = 0;
  size_t scale = 0, shift = 0;
};
struct DGroupNorm {
  int32_t channels = 0;
  size_t gamma = 0, beta = 0;
};
struct DSpatialNorm {
  DGroupNorm norm;
  DConv y, b;
};
struct DTemporalRes {
  DAffine norm1, norm2;
  DConv conv1, conv2;
};
struct DSpatialRes {
  DSpatialNorm norm1, norm2;
  DConv conv1, conv2, nin;
  bool has_nin = false;
};
struct DSpatialAttn {
  DSpatialNorm norm;
  DConv q, k, v, proj_out;
};
struct DLevel {
  std::vector<DSpatialRes> block;
  std::vector<DSpatialAttn> attn;
  bool has_upsample = false;
  DConv upsample;
};

class Blob : public WeightBlob {
 public:
  DAffine Affine(const emu3vq::ChannelAffine& a) {
    return {static_cast<int32_t>(a.scale.size()), Add(a.scale), Add(a.shift)};
  }
  DSpatialNorm SpatialNorm(const emu3vq::SpatialNormWeights& n) {
    return {{n.norm.channels, Add(n.norm.gamma), Add(n.norm.beta)}, Conv(n.conv_y), Conv(n.conv_b)};
  }
  DSpatialRes Res(const emu3vq::SpatialResnetWeights& r) {
    DSpatialRes d;
    d.norm1 = SpatialNorm(r.norm1);
    d.conv1 = Conv(r.conv1);
    d.norm2 = SpatialNorm(r.norm2);
    d.conv2 = Conv(r.conv2);
    if (r.nin_shortcut) {
      d.has_nin = true;
      d.nin = Conv(*r.nin_shortcut);
    }
    return d;
  }
  DSpatialAttn Attn(const emu3vq::SpatialAttnWeights& a) {
    return {SpatialNorm(a.norm), Conv(a.q), Conv(a.k), Conv(a.v), Conv(a.proj_out)};
  }
};

// Per-image float counts of the decode's buffers for a grid of `cells` codes.
struct Plan {
  size_t act = 0;        // largest activation
  size_t col = 0;        // largest 3x3 im2col matrix of one image
  size_t min_col = 0;    // one im2col column of the widest 3x3 conv: the smallest band
  size_t max_hw = 0;     // largest h * w (a GEMM dimension per image)
  size_t norm_cond = 0;  // a SpatialNorm's scale (or shift) at the code resolution
  size_t attn = 0;       // q, k or v
  size_t scores = 0;
  void Conv(const DConv& c, size_t hw) {
    act = std::max({act, c.cin * hw, c.cout * hw});
    max_hw = std::max(max_hw, hw);
    if (c.kernel == 3) {
      col = std::max(col, static_cast<size_t>(c.cin) * 9 * hw);
      min_col = std::max(min_col, static_cast<size_t>(c.cin) * 9);
    }
  }
  void Norm(const DSpatialNorm& n, size_t cells) { norm_cond = std::max(norm_cond, n.y.cout * cells); }
  void Res(const DSpatialRes& r, size_t hw, size_t cells) {
    Norm(r.norm1, cells);
    Norm(r.norm2, cells);
    Conv(r.conv1, hw);
    Conv(r.conv2, hw);
    if (r.has_nin) Conv(r.nin, hw);
  }
  void Attn(const DSpatialAttn& a, size_t hw, size_t cells) {
    Norm(a.norm, cells);
    Conv(a.q, hw);
    attn = std::max(attn, a.q.cout * hw);
    scores = std::max(scores, hw * hw);
  }
};

absl::Status Alloc(DeviceBuffer& buf, size_t bytes, const char* what) {
  auto b = DeviceBuffer::Allocate(bytes, absl::StrCat("CudaEmu3VqDecoder: ", what));
  if (!b.ok()) return b.status();
  buf = std::move(*b);
  return absl::OkStatus();
}

absl::Status Pin(PinnedBuffer& buf, size_t bytes, const char* what) {
  auto b = PinnedBuffer::Allocate(bytes, absl::StrCat("CudaEmu3VqDecoder: ", what));
  if (!b.ok()) return b.status();
  buf = std::move(*b);
  return absl::OkStatus();
}

}  // namespace

struct CudaEmu3VqDecoder::State {
  Emu3VqConfig config;
  CudaEmu3VqOptions options;
  int32_t max_cells = 0;

  size_t codebook = 0;
  DConv post_quant_conv, conv_in, conv_out;
  std::vector<DTemporalRes> time_res;
  std::vector<DConv> time_conv;
  DSpatialRes mid_block_1, mid_block_2;
  DSpatialAttn mid_attn;
  std::vector<DLevel> up;  // by level, run from the last
  DSpatialNorm norm_out;

  VqPrecision precision = VqPrecision::kFp32;  // the path that runs
  std::string fallback_reason;
  std::unique_ptr<Bf16Emu3VqNetwork> bf16;  // the bf16 path, when it runs

  int32_t chunk = 1;
  size_t act_floats = 0, col_floats = 0, cond_floats = 0, norm_floats = 0, attn_floats = 0, score_floats = 0;
  DeviceBuffer weights, buf_x, buf_a, buf_b, col, zq, norm_scale, norm_shift, q, k, v, scores, codes_dev, rgb_dev;
  PinnedBuffer codes_host, rgb_host, float_host;
  float *x = nullptr, *a = nullptr, *b = nullptr;  // the three activations (x the running one)
  // Last, so it is destroyed first: the stream is drained and the handle gone
  // before the buffers above are freed (the order before the fold).
  SideCublasStream gpu;

  ~State() {
    if (gpu.stream()) cudaStreamSynchronize(gpu.stream());
    bf16.reset();  // its cuDNN handle and buffers go before the stream (gpu, destroyed next)
  }

  const float* P(size_t off) const { return weights.as<float>() + off; }
  Fp32VqContext Ctx() const { return {gpu.stream(), gpu.cublas(), col.as<float>(), col_floats}; }

  absl::Status Conv(const DConv& c, const float* in, int32_t n, int32_t h, int32_t w, float* out, bool accumulate,
                    const char* what) {
    return Fp32Conv2d(Ctx(), {c.cin, c.cout, c.kernel, P(c.w), P(c.b)}, in, n, h, w, out, accumulate, what);
  }

  // One temporal tensor [z][n*zh*zw] in place (t1, t2 scratch of its size):
  // each TemporalResnetBlock (affine, swish, conv; twice; residual), then each
  // temporal upsample's conv and swish.
  absl::Status Temporal(float* io, float* t1, float* t2, int32_t n, int32_t zh, int32_t zw) {
    const int64_t m = static_cast<int64_t>(n) * zh * zw;
    const size_t bytes = static_cast<size_t>(m) * config.z_channels * sizeof(float);
    for (const DTemporalRes& r : time_res) {
      ARGEN_STATUS_RETURN(CudaStatus(kernels::Emu3ChannelAffineSwish(io, P(r.norm1.scale), P(r.norm1.shift),
                                                                     r.norm1.channels, m, t1, gpu.stream()),
                                     "temporal norm1"));
      ARGEN_STATUS_RETURN(Conv(r.conv1, t1, n, zh, zw, t2, false, "temporal conv1"));
      ARGEN_STATUS_RETURN(CudaStatus(kernels::Emu3ChannelAffineSwish(t2, P(r.norm2.scale), P(r.norm2.shift),
                                                                     r.norm2.channels, m, t2, gpu.stream()),
                                     "temporal norm2"));
      ARGEN_STATUS_RETURN(Conv(r.conv2, t2, n, zh, zw, t1, false, "temporal conv2"));
      ARGEN_STATUS_RETURN(
          CudaStatus(kernels::VqAddInPlace(io, t1, m * r.conv2.cout, gpu.stream()), "temporal residual"));
    }
    for (const DConv& c : time_conv) {
      ARGEN_STATUS_RETURN(Conv(c, io, n, zh, zw, t1, false, "temporal upsample conv"));
      ARGEN_STATUS_RETURN(CudaStatus(kernels::Emu3SwishInPlace(t1, m * c.cout, gpu.stream()), "temporal swish"));
      ARGEN_STATUS_RETURN(
          CudaStatus(cudaMemcpyAsync(io, t1, bytes, cudaMemcpyDeviceToDevice, gpu.stream()), "temporal copy"));
    }
    return absl::OkStatus();
  }

  // out = GroupNorm(in) * conv_y(zq') + conv_b(zq') (swish after when asked); in == out allowed.
  absl::Status SpatialNorm(const DSpatialNorm& sn, const float* in, float* out, int32_t n, int32_t h, int32_t w,
                           int32_t zh, int32_t zw, bool swish, const char* what) {
    const int64_t hw = static_cast<int64_t>(h) * w;
    ARGEN_STATUS_RETURN(CudaStatus(kernels::VqGroupNorm(in, P(sn.norm.gamma), P(sn.norm.beta), sn.norm.channels,
                                                        emu3vq::kGroupNormGroups, n, hw, kGroupNormEps,
                                                        /*swish=*/false, out, gpu.stream()),
                                   what));
    float* scale = norm_scale.as<float>();
    float* shift = norm_shift.as<float>();
    ARGEN_STATUS_RETURN(Conv(sn.y, zq.as<float>(), n, zh, zw, scale, false, what));
    ARGEN_STATUS_RETURN(Conv(sn.b, zq.as<float>(), n, zh, zw, shift, false, what));
    return CudaStatus(
        kernels::Emu3SpatialModulate(out, scale, shift, sn.norm.channels, n, h, w, zh, zw, swish, gpu.stream()), what);
  }

  absl::Status Resnet(const DSpatialRes& r, int32_t n, int32_t h, int32_t w, int32_t zh, int32_t zw) {
    const int64_t hw = static_cast<int64_t>(h) * w;
    ARGEN_STATUS_RETURN(SpatialNorm(r.norm1, x, a, n, h, w, zh, zw, true, "resblock norm1"));
    ARGEN_STATUS_RETURN(Conv(r.conv1, a, n, h, w, b, false, "resblock conv1"));
    ARGEN_STATUS_RETURN(SpatialNorm(r.norm2, b, b, n, h, w, zh, zw, true, "resblock norm2"));
    ARGEN_STATUS_RETURN(Conv(r.conv2, b, n, h, w, a, false, "resblock conv2"));
    if (r.has_nin) {
      ARGEN_STATUS_RETURN(Conv(r.nin, x, n, h, w, a, true, "resblock nin_shortcut"));
    } else {
      ARGEN_STATUS_RETURN(CudaStatus(
          kernels::VqAddInPlace(a, x, static_cast<int64_t>(r.conv2.cout) * n * hw, gpu.stream()), "residual"));
    }
    std::swap(x, a);
    return absl::OkStatus();
  }

  absl::Status Attn(const DSpatialAttn& at, int32_t n, int32_t h, int32_t w, int32_t zh, int32_t zw) {
    const int64_t hw = static_cast<int64_t>(h) * w;
    ARGEN_STATUS_RETURN(SpatialNorm(at.norm, x, a, n, h, w, zh, zw, false, "attn norm"));
    float* qp = q.as<float>();
    float* kp = k.as<float>();
    float* vp = v.as<float>();
    ARGEN_STATUS_RETURN(Conv(at.q, a, n, h, w, qp, false, "attn q"));
    ARGEN_STATUS_RETURN(Conv(at.k, a, n, h, w, kp, false, "attn k"));
    ARGEN_STATUS_RETURN(Conv(at.v, a, n, h, w, vp, false, "attn v"));
    ARGEN_STATUS_RETURN(Fp32SpatialAttention(Ctx(), qp, kp, vp, at.q.cout, n, hw, scores.as<float>(), a));
    return Conv(at.proj_out, a, n, h, w, x, true, "attn proj_out");  // x += proj_out(a)
  }

  // The network on n grids of zh x zw codes already in codes_dev; leaves [3][n*H*W] in b.
  absl::Status Network(int32_t n, int32_t zh, int32_t zw) {
    const int64_t m = static_cast<int64_t>(n) * zh * zw;
    float* z = zq.as<float>();
    ARGEN_STATUS_RETURN(CudaStatus(kernels::VqCodebookLookup(P(codebook), config.codebook_size, config.embed_dim,
                                                             codes_dev.as<int32_t>(), m, z, gpu.stream()),
                                   "codebook lookup"));
    // The latents (in b) and the condition (zq, from the codebook vectors) through the temporal stack.
    ARGEN_STATUS_RETURN(Conv(post_quant_conv, z, n, zh, zw, b, false, "post_quant_conv"));
    ARGEN_STATUS_RETURN(Temporal(b, a, x, n, zh, zw));
    ARGEN_STATUS_RETURN(Temporal(z, a, x, n, zh, zw));
    ARGEN_STATUS_RETURN(Conv(conv_in, b, n, zh, zw, x, false, "conv_in"));
    ARGEN_STATUS_RETURN(Resnet(mid_block_1, n, zh, zw, zh, zw));
    ARGEN_STATUS_RETURN(Attn(mid_attn, n, zh, zw, zh, zw));
    ARGEN_STATUS_RETURN(Resnet(mid_block_2, n, zh, zw, zh, zw));
    int32_t h = zh, w = zw;
    for (int32_t level = config.levels() - 1; level >= 0; --level) {
      const DLevel& l = up[level];
      for (size_t i = 0; i < l.block.size(); ++i) {
        ARGEN_STATUS_RETURN(Resnet(l.block[i], n, h, w, zh, zw));
        if (!l.attn.empty()) ARGEN_STATUS_RETURN(Attn(l.attn[i], n, h, w, zh, zw));
      }
      if (l.has_upsample) {
        ARGEN_STATUS_RETURN(
            CudaStatus(kernels::VqUpsampleNearest2x(x, l.upsample.cin, n, h, w, a, gpu.stream()), "upsample"));
        h *= 2;
        w *= 2;
        ARGEN_STATUS_RETURN(Conv(l.upsample, a, n, h, w, x, false, "upsample conv"));
      }
    }
    ARGEN_STATUS_RETURN(SpatialNorm(norm_out, x, a, n, h, w, zh, zw, true, "norm_out"));
    return Conv(conv_out, a, n, h, w, b, false, "conv_out");
  }

  // The codes and result staging of a chunk (either path).
  absl::Status SetupIo() {
    const size_t cells = static_cast<size_t>(max_cells), n = static_cast<size_t>(chunk);
    const size_t f = static_cast<size_t>(config.spatial_factor());
    const size_t pixels = cells * f * f * n;
    ARGEN_STATUS_RETURN(Alloc(codes_dev, cells * n * sizeof(int32_t), "codes"));
    ARGEN_STATUS_RETURN(Alloc(rgb_dev, pixels * 3, "rgb8"));
    ARGEN_STATUS_RETURN(Pin(codes_host, cells * n * sizeof(int32_t), "codes"));
    ARGEN_STATUS_RETURN(Pin(rgb_host, pixels * 3, "rgb8"));
    return Pin(float_host, pixels * 3 * sizeof(float), "float pixels");
  }

  // The bf16 path; its Status when it cannot run.
  absl::Status SetupBf16(const Emu3VqWeights& weights) {
    Bf16Emu3VqOptions bo;
    bo.max_images_per_chunk = options.max_images_per_chunk;
    bo.workspace_bytes = options.workspace_bytes;
    bo.cudnn_workspace_bytes = options.cudnn_workspace_bytes;
    bo.benchmark_algorithms = options.benchmark_algorithms;
    absl::StatusOr<std::unique_ptr<Bf16Emu3VqNetwork>> net =
        Bf16Emu3VqNetwork::Create(weights, config, max_cells, bo, gpu.stream(), gpu.cublas());
    if (!net.ok()) return net.status();
    for (const auto& [rows, cols] : options.plan_grids) ARGEN_STATUS_RETURN((*net)->PlanGrid(rows, cols));
    bf16 = std::move(*net);
    chunk = bf16->chunk();
    return absl::OkStatus();
  }

  absl::Status Setup(const Emu3VqWeights& weights) {
    Blob blob;
    codebook = blob.Add(weights.codebook);
    post_quant_conv = blob.Conv(weights.post_quant_conv);
    for (const emu3vq::TemporalResnetWeights& t : weights.time_res_stack) {
      time_res.push_back({blob.Affine(t.norm1), blob.Affine(t.norm2), blob.Conv(t.conv1), blob.Conv(t.conv2)});
    }
    for (const Conv2dWeights& c : weights.time_conv) time_conv.push_back(blob.Conv(c));
    conv_in = blob.Conv(weights.conv_in);
    mid_block_1 = blob.Res(weights.mid_block_1);
    mid_attn = blob.Attn(weights.mid_attn_1);
    mid_block_2 = blob.Res(weights.mid_block_2);
    for (const emu3vq::UpLevelWeights& l : weights.up) {
      DLevel d;
      for (const emu3vq::SpatialResnetWeights& r : l.block) d.block.push_back(blob.Res(r));
      for (const emu3vq::SpatialAttnWeights& at : l.attn) d.attn.push_back(blob.Attn(at));
      if (l.upsample) {
        d.has_upsample = true;
        d.upsample = blob.Conv(*l.upsample);
      }
      up.push_back(std::move(d));
    }
    norm_out = blob.SpatialNorm(weights.norm_out);
    conv_out = blob.Conv(weights.conv_out);

    // Per image at the largest grid, walked as Network runs.
    const size_t cells = static_cast<size_t>(max_cells);
    Plan plan;
    plan.Conv(post_quant_conv, cells);
    for (const DTemporalRes& t : time_res) {
      plan.Conv(t.conv1, cells);
      plan.Conv(t.conv2, cells);
    }
    for (const DConv& c : time_conv) plan.Conv(c, cells);
    plan.Conv(conv_in, cells);
    plan.Res(mid_block_1, cells, cells);
    plan.Attn(mid_attn, cells, cells);
    plan.Res(mid_block_2, cells, cells);
    size_t hw = cells;
    for (int32_t level = config.levels() - 1; level >= 0; --level) {
      for (const DSpatialRes& r : up[level].block) plan.Res(r, hw, cells);
      for (const DSpatialAttn& at : up[level].attn) plan.Attn(at, hw, cells);
      if (up[level].has_upsample) {
        hw *= 4;
        plan.Conv(up[level].upsample, hw);
      }
    }
    plan.Norm(norm_out, cells);
    plan.Conv(conv_out, hw);
    const size_t cond = static_cast<size_t>(config.z_channels) * cells;
    const size_t per_image_bytes =
        sizeof(float) * (3 * plan.act + cond + 2 * plan.norm_cond + 3 * plan.attn + plan.scores);
    const size_t limit = static_cast<size_t>(options.workspace_bytes);
    size_t n = std::min<size_t>(options.max_images_per_chunk, std::max<size_t>(1, limit / 2 / per_image_bytes));
    n = std::max<size_t>(1, std::min(n, static_cast<size_t>(INT_MAX) / plan.max_hw));  // cuBLAS dimensions are ints
    if (n * per_image_bytes + sizeof(float) * plan.min_col > limit) {
      return absl::ResourceExhaustedError(absl::StrCat("CudaEmu3VqDecoder: workspace_bytes ", options.workspace_bytes,
                                                       " is too small: a grid of ", max_cells, " codes needs at least ",
                                                       per_image_bytes + sizeof(float) * plan.min_col, " bytes"));
    }
    chunk = static_cast<int32_t>(n);
    act_floats = plan.act * n;
    cond_floats = cond * n;
    norm_floats = plan.norm_cond * n;
    attn_floats = plan.attn * n;
    score_floats = plan.scores * n;
    col_floats = std::max(plan.min_col, std::min(plan.col * n, (limit - n * per_image_bytes) / sizeof(float)));

    ARGEN_STATUS_RETURN(Alloc(this->weights, blob.data().size() * sizeof(float), "weights"));
    ARGEN_STATUS_RETURN(Alloc(buf_x, act_floats * sizeof(float), "activation x"));
    ARGEN_STATUS_RETURN(Alloc(buf_a, act_floats * sizeof(float), "activation a"));
    ARGEN_STATUS_RETURN(Alloc(buf_b, act_floats * sizeof(float), "activation b"));
    ARGEN_STATUS_RETURN(Alloc(col, col_floats * sizeof(float), "im2col band"));
    ARGEN_STATUS_RETURN(Alloc(zq, cond_floats * sizeof(float), "condition zq"));
    ARGEN_STATUS_RETURN(Alloc(norm_scale, norm_floats * sizeof(float), "spatial norm scale"));
    ARGEN_STATUS_RETURN(Alloc(norm_shift, norm_floats * sizeof(float), "spatial norm shift"));
    ARGEN_STATUS_RETURN(Alloc(q, attn_floats * sizeof(float), "attention q"));
    ARGEN_STATUS_RETURN(Alloc(k, attn_floats * sizeof(float), "attention k"));
    ARGEN_STATUS_RETURN(Alloc(v, attn_floats * sizeof(float), "attention v"));
    ARGEN_STATUS_RETURN(Alloc(scores, score_floats * sizeof(float), "attention scores"));
    ARGEN_CUDA_RETURN(cudaMemcpyAsync(this->weights.as(), blob.data().data(), blob.data().size() * sizeof(float),
                                      cudaMemcpyHostToDevice, gpu.stream()),
                      "CudaEmu3VqDecoder: upload weights");
    ARGEN_CUDA_RETURN(cudaStreamSynchronize(gpu.stream()), "CudaEmu3VqDecoder: upload weights");
    x = buf_x.as<float>();
    a = buf_a.as<float>();
    b = buf_b.as<float>();
    return absl::OkStatus();
  }
};

absl::StatusOr<std::unique_ptr<CudaEmu3VqDecoder>> CudaEmu3VqDecoder::Create(const Emu3VqWeights& weights,
                                                                             const Emu3VqConfig& config,
                                                                             int32_t max_cells,
                                                                             const CudaEmu3VqOptions& options) {
  if (absl::Status s = emu3vq::ValidateEmu3VqConfig(config, "Emu3 vision tokenizer config"); !s.ok()) return s;
  if (options.max_images_per_chunk < 1 || options.max_images_per_chunk > kMaxChunkImages) {
    return absl::InvalidArgumentError(absl::StrCat("CudaEmu3VqDecoder: max_images_per_chunk must be in [1, ",
                                                   kMaxChunkImages, "], got ", options.max_images_per_chunk));
  }
  if (options.workspace_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaEmu3VqDecoder: workspace_bytes must be > 0, got ", options.workspace_bytes));
  }
  if (max_cells <= 0) return absl::InvalidArgumentError("CudaEmu3VqDecoder: max_cells must be positive");
  if (options.precision != VqPrecision::kFp32 && options.precision != VqPrecision::kTf32 &&
      options.precision != VqPrecision::kBf16) {
    return absl::InvalidArgumentError("CudaEmu3VqDecoder: precision must be fp32, tf32 or bf16");
  }
  if (options.cudnn_workspace_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaEmu3VqDecoder: cudnn_workspace_bytes must be >= 0, got ", options.cudnn_workspace_bytes));
  }
  for (const auto& [rows, cols] : options.plan_grids) {
    if (rows <= 0 || cols <= 0 || int64_t{rows} * cols > max_cells) {
      return absl::InvalidArgumentError(absl::StrCat("CudaEmu3VqDecoder: plan_grids has ", rows, "x", cols,
                                                     ", not a grid of 1 ... max_cells (", max_cells, ") codes"));
    }
  }
  if (weights.codebook.size() != static_cast<size_t>(config.codebook_size) * config.embed_dim ||
      weights.up.size() != static_cast<size_t>(config.levels())) {
    return absl::InvalidArgumentError("CudaEmu3VqDecoder: weights do not match the config");
  }

  auto s = std::make_unique<State>();
  s->config = config;
  s->options = options;
  s->max_cells = max_cells;
  ARGEN_STATUS_RETURN(s->gpu.Init("CudaEmu3VqDecoder", /*tf32=*/options.precision == VqPrecision::kTf32));
  if (options.precision == VqPrecision::kBf16) {
    absl::Status bf16 = s->SetupBf16(weights);
    if (bf16.ok()) {
      s->precision = VqPrecision::kBf16;
    } else if (!options.fallback_to_fp32 || bf16.code() == absl::StatusCode::kResourceExhausted ||
               bf16.code() == absl::StatusCode::kInvalidArgument) {
      return absl::Status(bf16.code(), absl::StrCat("CudaEmu3VqDecoder: bf16 path: ", bf16.message()));
    } else {
      cudaGetLastError();  // a launch error of the failed path must not surface later
      s->bf16.reset();
      s->fallback_reason = absl::StrCat(absl::StatusCodeToString(bf16.code()), ": ", bf16.message());
      std::fprintf(stderr, "argen: Emu3 vision decoder: the bf16 path cannot run here (%s); decoding in fp32\n",
                   s->fallback_reason.c_str());
    }
  }
  if (s->bf16 == nullptr) {
    s->precision = options.precision == VqPrecision::kTf32 ? VqPrecision::kTf32 : VqPrecision::kFp32;
    ARGEN_STATUS_RETURN(s->Setup(weights));
  }
  ARGEN_STATUS_RETURN(s->SetupIo());
  return std::unique_ptr<CudaEmu3VqDecoder>(new CudaEmu3VqDecoder(std::move(s)));
}

CudaEmu3VqDecoder::CudaEmu3VqDecoder(std::unique_ptr<State> state) : s_(std::move(state)) {}
CudaEmu3VqDecoder::~CudaEmu3VqDecoder() = default;

int32_t CudaEmu3VqDecoder::chunk_images() const { return s_->chunk; }
size_t CudaEmu3VqDecoder::scratch_bytes() const {
  if (s_->bf16) return s_->bf16->scratch_bytes();
  return sizeof(float) * (3 * s_->act_floats + s_->col_floats + s_->cond_floats + 2 * s_->norm_floats +
                          3 * s_->attn_floats + s_->score_floats);
}
size_t CudaEmu3VqDecoder::weight_bytes() const { return s_->bf16 ? s_->bf16->weight_bytes() : s_->weights.bytes(); }
VqPrecision CudaEmu3VqDecoder::precision() const { return s_->precision; }
const std::string& CudaEmu3VqDecoder::fallback_reason() const { return s_->fallback_reason; }
std::string CudaEmu3VqDecoder::description() const {
  if (s_->bf16) return s_->bf16->description();
  std::string d =
      absl::StrCat(VqPrecisionName(s_->precision), " [C][N*H*W]: chunk ", s_->chunk, " of up to ", s_->max_cells,
                   " codes, scratch ", scratch_bytes() >> 20, " MiB, weights ", weight_bytes() >> 20, " MiB");
  if (!s_->fallback_reason.empty()) absl::StrAppend(&d, " (bf16 fell back: ", s_->fallback_reason, ")");
  return d;
}

std::vector<std::vector<size_t>> CudaEmu3VqDecoder::Chunks(const std::vector<emu3vq::CodeGrid>& grids) const {
  std::map<std::pair<int32_t, int32_t>, std::vector<size_t>> by_size;
  std::vector<std::pair<int32_t, int32_t>> order;  // sizes in order of first appearance
  for (size_t i = 0; i < grids.size(); ++i) {
    const std::pair<int32_t, int32_t> size{grids[i].height, grids[i].width};
    auto [it, inserted] = by_size.try_emplace(size);
    if (inserted) order.push_back(size);
    it->second.push_back(i);
  }
  std::vector<std::vector<size_t>> chunks;
  for (const auto& size : order) {
    const std::vector<size_t>& all = by_size[size];
    for (size_t begin = 0; begin < all.size(); begin += s_->chunk) {
      const size_t end = std::min(all.size(), begin + static_cast<size_t>(s_->chunk));
      chunks.emplace_back(all.begin() + begin, all.begin() + end);
    }
  }
  return chunks;
}

absl::Status CudaEmu3VqDecoder::RunChunk(const std::vector<const emu3vq::CodeGrid*>& grids, bool rgb) {
  State& s = *s_;
  const int32_t n = static_cast<int32_t>(grids.size());
  const int32_t zh = grids[0]->height, zw = grids[0]->width, f = s.config.spatial_factor();
  const size_t cells = static_cast<size_t>(zh) * zw;
  const size_t hw = cells * f * f;
  auto run = [&]() -> absl::Status {
    ARGEN_CUDA_RETURN(cudaSetDevice(s.gpu.device()), "Emu3 vision decode: set device");
    int32_t* staged = s.codes_host.as<int32_t>();
    for (int32_t i = 0; i < n; ++i) std::memcpy(staged + i * cells, grids[i]->codes.data(), cells * sizeof(int32_t));
    ARGEN_CUDA_RETURN(
        cudaMemcpyAsync(s.codes_dev.as(), staged, n * cells * sizeof(int32_t), cudaMemcpyHostToDevice, s.gpu.stream()),
        "Emu3 vision decode: upload codes");
    // [3][n*hw] fp32 planar from either path.
    const float* out = s.b;
    if (s.bf16) {
      ARGEN_STATUS_RETURN(s.bf16->Run(s.codes_dev.as<int32_t>(), n, zh, zw));
      out = s.bf16->output();
    } else {
      ARGEN_STATUS_RETURN(s.Network(n, zh, zw));
    }
    if (rgb) {
      ARGEN_CUDA_RETURN(kernels::VqToRgb8(out, n, static_cast<int64_t>(hw), s.rgb_dev.as<uint8_t>(), s.gpu.stream()),
                        "Emu3 vision decode: rgb8");
      ARGEN_CUDA_RETURN(
          cudaMemcpyAsync(s.rgb_host.as(), s.rgb_dev.as(), n * hw * 3, cudaMemcpyDeviceToHost, s.gpu.stream()),
          "Emu3 vision decode: download rgb8");
    } else {
      ARGEN_CUDA_RETURN(
          cudaMemcpyAsync(s.float_host.as(), out, n * hw * 3 * sizeof(float), cudaMemcpyDeviceToHost, s.gpu.stream()),
          "Emu3 vision decode: download floats");
    }
    ARGEN_CUDA_RETURN(cudaStreamSynchronize(s.gpu.stream()), "Emu3 vision decode: synchronize");
    return absl::OkStatus();
  };
  absl::Status st = run();
  // Whatever was queued finishes before the staging buffers are reused.
  if (!st.ok()) cudaStreamSynchronize(s.gpu.stream());
  return st;
}

absl::StatusOr<std::vector<engine::RgbImage>> CudaEmu3VqDecoder::Decode(const std::vector<emu3vq::CodeGrid>& grids) {
  for (size_t i = 0; i < grids.size(); ++i) {
    if (absl::Status st = emu3vq::ValidateCodeGrid(grids[i], i, s_->max_cells, s_->config.codebook_size); !st.ok()) {
      return st;
    }
  }
  const int32_t f = s_->config.spatial_factor();
  std::vector<engine::RgbImage> images(grids.size());
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::vector<size_t>& chunk : Chunks(grids)) {
    std::vector<const emu3vq::CodeGrid*> members;
    for (size_t i : chunk) members.push_back(&grids[i]);
    if (absl::Status st = RunChunk(members, /*rgb=*/true); !st.ok()) return st;
    const size_t bytes = 3 * static_cast<size_t>(grids[chunk[0]].height) * f * grids[chunk[0]].width * f;
    const uint8_t* rgb = s_->rgb_host.as<uint8_t>();
    for (size_t j = 0; j < chunk.size(); ++j) {
      engine::RgbImage& image = images[chunk[j]];
      image.width = grids[chunk[j]].width * f;
      image.height = grids[chunk[j]].height * f;
      image.rgb.assign(rgb + j * bytes, rgb + (j + 1) * bytes);
    }
  }
  return images;
}

absl::Status CudaEmu3VqDecoder::DecodeToFloat(const std::vector<emu3vq::CodeGrid>& grids,
                                              std::vector<std::vector<float>>* chw) {
  for (size_t i = 0; i < grids.size(); ++i) {
    if (absl::Status st = emu3vq::ValidateCodeGrid(grids[i], i, s_->max_cells, s_->config.codebook_size); !st.ok()) {
      return st;
    }
  }
  const int32_t f = s_->config.spatial_factor();
  chw->assign(grids.size(), {});
  std::lock_guard<std::mutex> lock(mu_);
  for (const std::vector<size_t>& chunk : Chunks(grids)) {
    std::vector<const emu3vq::CodeGrid*> members;
    for (size_t i : chunk) members.push_back(&grids[i]);
    if (absl::Status st = RunChunk(members, /*rgb=*/false); !st.ok()) return st;
    // [3][n*hw] -> per image [3][hw].
    const size_t n = chunk.size();
    const size_t hw = static_cast<size_t>(grids[chunk[0]].height) * f * grids[chunk[0]].width * f;
    const float* out = s_->float_host.as<float>();
    for (size_t j = 0; j < n; ++j) {
      std::vector<float>& img = (*chw)[chunk[j]];
      img.resize(3 * hw);
      for (size_t c = 0; c < 3; ++c) std::memcpy(img.data() + c * hw, out + c * n * hw + j * hw, hw * sizeof(float));
    }
  }
  return absl::OkStatus();
}

}  // namespace argen::vq
