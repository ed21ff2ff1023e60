#include "engine/vq_cuda/cuda_vae_decoder.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/device_buffer.h"
#include "engine/vq/group_norm.h"
#include "engine/vq_cuda/fp32_vq_ops.h"
#include "engine/vq_cuda/fp32_vqgan_blocks.h"
#include "engine/vq_cuda/side_cublas_stream.h"
#include "engine/vq_cuda/weight_blob.h"
#include "kernels/vq_kernels.h"

namespace argen::vq {
namespace {

using cuda::CudaStatus;
using cuda::DeviceBuffer;
using cuda::PinnedBuffer;
using vqgan::LatentGrid;
using vqgan::VqganConfig;
using vqgan::VqganDecoderWeights;

constexpr int32_t kMaxChunkImages = 4096;

// Device weights as offsets (floats) into the one uploaded blob.
using DGroupNorm = BlobGroupNorm;
using DRes = BlobResnet;
using DAttn = BlobAttn;
struct DLevel {
  std::vector<DRes> block;
  std::vector<DAttn> attn;  // one per block, or empty
  bool upsample_2x = false;
  bool has_upsample_conv = false;
  BlobConv upsample;
  int32_t channels = 0;  // the level's output channels (what the upsample doubles)
};

using Blob = VqganWeightBlob;

// Per-image float counts of the decode's buffers for the largest latent.
struct Plan {
  size_t act = 0;      // largest activation (the latent input included)
  size_t col = 0;      // largest 3x3 im2col matrix of one image
  size_t min_col = 0;  // one im2col column of the widest 3x3 conv: the smallest band
  size_t max_hw = 0;   // largest h * w (a GEMM dimension per image)
  size_t attn = 0;     // q, k or v
  size_t scores = 0;
  void Act(size_t floats) { act = std::max(act, floats); }
  void Conv(const BlobConv& c, size_t hw) {
    Act(std::max(c.cin * hw, c.cout * hw));
    max_hw = std::max(max_hw, hw);
    if (c.kernel == 3) {
      col = std::max(col, static_cast<size_t>(c.cin) * 9 * hw);
      min_col = std::max(min_col, static_cast<size_t>(c.cin) * 9);
    }
  }
  void Res(const DRes& r, size_t hw) {
    Conv(r.conv1, hw);
    Conv(r.conv2, hw);
    if (r.has_nin) Conv(r.nin, hw);
  }
  void Attn(const DAttn& a, size_t hw) {
    Conv(a.q, hw);
    Conv(a.proj_out, hw);
    attn = std::max(attn, a.q.cout * hw);
    scores = std::max(scores, hw * hw);
  }
};

absl::Status Alloc(DeviceBuffer& buf, size_t bytes, const char* what) {
  auto b = DeviceBuffer::Allocate(bytes, absl::StrCat("CudaVaeDecoder: ", what));
  if (!b.ok()) return b.status();
  buf = std::move(*b);
  return absl::OkStatus();
}

absl::Status Pin(PinnedBuffer& buf, size_t bytes, const char* what) {
  auto b = PinnedBuffer::Allocate(bytes, absl::StrCat("CudaVaeDecoder: ", what));
  if (!b.ok()) return b.status();
  buf = std::move(*b);
  return absl::OkStatus();
}

}  // namespace

struct CudaVaeDecoder::State {
  VqganConfig config;
  vqgan::DecodeLimits limits;
  CudaVaeOptions options;

  BlobConv conv_in, conv_out;
  DRes mid_block_1, mid_block_2;
  bool has_mid_attn = false;
  DAttn mid_attn;
  std::vector<DLevel> up;  // by level, run from the last
  DGroupNorm norm_out;

  int32_t chunk = 1;
  size_t act_floats = 0, col_floats = 0, attn_floats = 0, score_floats = 0, latent_floats = 0, out_floats = 0;
  DeviceBuffer weights, buf_x, buf_a, buf_b, col, q, k, v, scores;
  PinnedBuffer latent_host, out_host;
  float *x = nullptr, *a = nullptr, *b = nullptr;  // the three activations (x the running one)
  // Last, so it is destroyed first: the stream is drained and the handle gone
  // before the buffers above are freed (the order before the fold).
  SideCublasStream gpu;

  Fp32BlockContext Blocks() const {
    return {{gpu.stream(), gpu.cublas(), col.as<float>(), col_floats},
            weights.as<float>(),
            vqgan::kGroupNormGroups,
            q.as<float>(),
            k.as<float>(),
            v.as<float>(),
            scores.as<float>()};
  }

  absl::Status Conv(const BlobConv& c, const float* in, int32_t n, int32_t h, int32_t w, float* out, bool accumulate,
                    const char* what) {
    return Fp32BlobConv(Blocks(), c, in, n, h, w, out, accumulate, what);
  }
  absl::Status Norm(const DGroupNorm& g, const float* in, float* out, int32_t n, int64_t hw, bool swish,
                    const char* what) {
    return Fp32GroupNorm(Blocks(), g, in, n, hw, out, swish, what);
  }
  // As VqganDecoder::ResnetBlock and AttnBlock.
  absl::Status Resnet(const DRes& r, int32_t n, int32_t h, int32_t w) {
    return Fp32ResnetBlock(Blocks(), r, x, a, b, n, h, w);
  }
  absl::Status Attn(const DAttn& at, int32_t n, int32_t h, int32_t w) {
    return Fp32AttnBlock(Blocks(), at, x, a, n, h, w);
  }

  // The network on n latents of h x w already in a ([z][n*h*w]); leaves [out_ch][n*H*W] in b.
  absl::Status Network(int32_t n, int32_t h, int32_t w) {
    ARGEN_STATUS_RETURN(Conv(conv_in, a, n, h, w, x, false, "conv_in"));
    ARGEN_STATUS_RETURN(Resnet(mid_block_1, n, h, w));
    if (has_mid_attn) ARGEN_STATUS_RETURN(Attn(mid_attn, n, h, w));
    ARGEN_STATUS_RETURN(Resnet(mid_block_2, n, h, w));
    for (int32_t level = config.levels() - 1; level >= 0; --level) {
      const DLevel& l = up[level];
      for (size_t i = 0; i < l.block.size(); ++i) {
        ARGEN_STATUS_RETURN(Resnet(l.block[i], n, h, w));
        if (!l.attn.empty()) ARGEN_STATUS_RETURN(Attn(l.attn[i], n, h, w));
      }
      if (l.upsample_2x) {
        float* up_out = l.has_upsample_conv ? a : b;
        ARGEN_STATUS_RETURN(
            CudaStatus(kernels::VqUpsampleNearest2x(x, l.channels, n, h, w, up_out, gpu.stream()), "upsample"));
        h *= 2;
        w *= 2;
        if (l.has_upsample_conv) {
          ARGEN_STATUS_RETURN(Conv(l.upsample, a, n, h, w, x, false, "upsample conv"));
        } else {
          std::swap(x, b);
        }
      }
    }
    ARGEN_STATUS_RETURN(Norm(norm_out, x, a, n, static_cast<int64_t>(h) * w, true, "norm_out"));
    return Conv(conv_out, a, n, h, w, b, false, "conv_out");
  }

  absl::Status Setup(const VqganDecoderWeights& w) {
    Blob blob;
    conv_in = blob.Conv(w.conv_in);
    mid_block_1 = blob.Res(w.mid_block_1);
    if (w.mid_attn_1) {
      has_mid_attn = true;
      mid_attn = blob.Attn(*w.mid_attn_1);
    }
    mid_block_2 = blob.Res(w.mid_block_2);
    for (const vqgan::UpLevelWeights& l : w.up) {
      DLevel d;
      for (const ResnetBlockWeights& r : l.block) d.block.push_back(blob.Res(r));
      for (const AttnBlockWeights& at : l.attn) d.attn.push_back(blob.Attn(at));
      if (l.block.empty() || (!d.attn.empty() && d.attn.size() != d.block.size())) {
        return absl::InvalidArgumentError("CudaVaeDecoder: an up level's blocks and attention do not match");
      }
      d.channels = l.block.back().conv2.cout;
      d.upsample_2x = l.upsample_2x;
      if (l.upsample) {
        d.has_upsample_conv = true;
        d.upsample = blob.Conv(*l.upsample);
      }
      up.push_back(std::move(d));
    }
    norm_out = blob.Norm(w.norm_out);
    conv_out = blob.Conv(w.conv_out);

    // Per image at the largest latent, walked as Network runs.
    const size_t cells = static_cast<size_t>(limits.max_cells);
    Plan plan;
    plan.Act(static_cast<size_t>(config.z_channels) * cells);
    plan.Conv(conv_in, cells);
    plan.Res(mid_block_1, cells);
    if (has_mid_attn) plan.Attn(mid_attn, cells);
    plan.Res(mid_block_2, cells);
    size_t hw = cells;
    for (int32_t level = config.levels() - 1; level >= 0; --level) {
      const DLevel& l = up[level];
      for (const DRes& r : l.block) plan.Res(r, hw);
      for (const DAttn& at : l.attn) plan.Attn(at, hw);
      if (l.upsample_2x) {
        hw *= 4;
        plan.Act(static_cast<size_t>(l.channels) * hw);
        if (l.has_upsample_conv) plan.Conv(l.upsample, hw);
      }
    }
    plan.Conv(conv_out, hw);
    const size_t latent = static_cast<size_t>(config.z_channels) * cells;
    const size_t out = static_cast<size_t>(conv_out.cout) * hw;
    const size_t per_image_bytes = sizeof(float) * (3 * plan.act + 3 * plan.attn + plan.scores);
    const size_t limit = static_cast<size_t>(options.workspace_bytes);
    size_t n = std::min<size_t>(options.max_images_per_chunk, std::max<size_t>(1, limit / 2 / per_image_bytes));
    n = std::max<size_t>(1, std::min(n, static_cast<size_t>(INT_MAX) / plan.max_hw));  // cuBLAS dimensions are ints
    if (n * per_image_bytes + sizeof(float) * plan.min_col > limit) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "CudaVaeDecoder: workspace_bytes ", options.workspace_bytes, " is too small: a latent of ", limits.max_cells,
          " cells needs at least ", per_image_bytes + sizeof(float) * plan.min_col, " bytes"));
    }
    chunk = static_cast<int32_t>(n);
    act_floats = plan.act * n;
    attn_floats = plan.attn * n;
    score_floats = plan.scores * n;
    latent_floats = latent * n;
    out_floats = out * n;
    col_floats = std::max(plan.min_col, std::min(plan.col * n, (limit - n * per_image_bytes) / sizeof(float)));

    ARGEN_STATUS_RETURN(Alloc(weights, blob.data().size() * sizeof(float), "weights"));
    ARGEN_STATUS_RETURN(Alloc(buf_x, act_floats * sizeof(float), "activation x"));
    ARGEN_STATUS_RETURN(Alloc(buf_a, act_floats * sizeof(float), "activation a"));
    ARGEN_STATUS_RETURN(Alloc(buf_b, act_floats * sizeof(float), "activation b"));
    ARGEN_STATUS_RETURN(Alloc(col, col_floats * sizeof(float), "im2col band"));
    // Attention buffers only where the network has attention (the allocation of 0 bytes is a null buffer).
    ARGEN_STATUS_RETURN(Alloc(q, attn_floats * sizeof(float), "attention q"));
    ARGEN_STATUS_RETURN(Alloc(k, attn_floats * sizeof(float), "attention k"));
    ARGEN_STATUS_RETURN(Alloc(v, attn_floats * sizeof(float), "attention v"));
    ARGEN_STATUS_RETURN(Alloc(scores, score_floats * sizeof(float), "attention scores"));
    ARGEN_STATUS_RETURN(Pin(latent_host, latent_floats * sizeof(float), "latents"));
    ARGEN_STATUS_RETURN(Pin(out_host, out_floats * sizeof(float), "float pixels"));
    ARGEN_CUDA_RETURN(cudaMemcpyAsync(weights.as(), blob.data().data(), blob.data().size() * sizeof(float),
                                      cudaMemcpyHostToDevice, gpu.stream()),
                      "CudaVaeDecoder: upload weights");
    ARGEN_CUDA_RETURN(cudaStreamSynchronize(gpu.stream()), "CudaVaeDecoder: upload weights");
    x = buf_x.as<float>();
    a = buf_a.as<float>();
    b = buf_b.as<float>();
    return absl::OkStatus();
  }
};

absl::StatusOr<std::unique_ptr<CudaVaeDecoder>> CudaVaeDecoder::Create(const VqganDecoderWeights& weights,
                                                                       const VqganConfig& config,
                                                                       vqgan::DecodeLimits limits,
                                                                       const CudaVaeOptions& options) {
  if (absl::Status s = vqgan::ValidateVqganConfig(config, "VAE decoder config"); !s.ok()) return s;
  if (config.quantized || config.tanh_out) {
    return absl::InvalidArgumentError(
        "CudaVaeDecoder: decodes latents of a decoder without a quantizer or a tanh output");
  }
  if (options.max_images_per_chunk < 1 || options.max_images_per_chunk > kMaxChunkImages) {
    return absl::InvalidArgumentError(absl::StrCat("CudaVaeDecoder: max_images_per_chunk must be in [1, ",
                                                   kMaxChunkImages, "], got ", options.max_images_per_chunk));
  }
  if (options.workspace_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaVaeDecoder: workspace_bytes must be > 0, got ", options.workspace_bytes));
  }
  if (limits.max_cells <= 0 || limits.max_side <= 0) {
    return absl::InvalidArgumentError("CudaVaeDecoder: the latent limits must be positive");
  }
  if (weights.up.size() != static_cast<size_t>(config.levels()) || weights.conv_in.cin != config.z_channels) {
    return absl::InvalidArgumentError("CudaVaeDecoder: weights do not match the config");
  }

  auto s = std::make_unique<State>();
  s->config = config;
  s->limits = limits;
  s->options = options;
  ARGEN_STATUS_RETURN(s->gpu.Init("CudaVaeDecoder", /*tf32=*/options.tf32));
  ARGEN_STATUS_RETURN(s->Setup(weights));
  return std::unique_ptr<CudaVaeDecoder>(new CudaVaeDecoder(std::move(s)));
}

CudaVaeDecoder::CudaVaeDecoder(std::unique_ptr<State> state) : s_(std::move(state)) {}
CudaVaeDecoder::~CudaVaeDecoder() = default;

int32_t CudaVaeDecoder::chunk_images() const { return s_->chunk; }
size_t CudaVaeDecoder::scratch_bytes() const {
  return sizeof(float) * (3 * s_->act_floats + s_->col_floats + 3 * s_->attn_floats + s_->score_floats);
}
size_t CudaVaeDecoder::weight_bytes() const { return s_->weights.bytes(); }
std::string CudaVaeDecoder::description() const {
  return absl::StrCat(s_->options.tf32 ? "tf32" : "fp32", " [C][N*H*W]: chunk ", s_->chunk, " of up to ",
                      s_->limits.max_cells, " latent cells, scratch ", scratch_bytes() >> 20, " MiB, weights ",
                      weight_bytes() >> 20, " MiB");
}

absl::Status CudaVaeDecoder::Validate(const LatentGrid& latent, size_t index) const {
  const int64_t cells = static_cast<int64_t>(latent.height) * latent.width;
  if (latent.height <= 0 || latent.width <= 0 || cells > s_->limits.max_cells ||
      std::max(latent.height, latent.width) > s_->limits.max_side) {
    return absl::InvalidArgumentError(absl::StrCat("latents[", index, "]: size ", latent.height, " x ", latent.width,
                                                   " is empty or over the decoder's limit (", s_->limits.max_cells,
                                                   " cells, side ", s_->limits.max_side, ")"));
  }
  if (latent.chw.size() != static_cast<size_t>(s_->config.z_channels) * cells) {
    return absl::InvalidArgumentError(absl::StrCat("latents[", index, "]: ", latent.chw.size(), " values for ",
                                                   s_->config.z_channels, " channels of ", latent.height, " x ",
                                                   latent.width));
  }
  return absl::OkStatus();
}

absl::Status CudaVaeDecoder::RunChunk(const std::vector<const LatentGrid*>& latents) {
  State& s = *s_;
  const int32_t n = static_cast<int32_t>(latents.size());
  const int32_t h = latents[0]->height, w = latents[0]->width, z = s.config.z_channels;
  const size_t cells = static_cast<size_t>(h) * w;
  const size_t d = static_cast<size_t>(s.config.downsample());
  const size_t out_floats = static_cast<size_t>(s.conv_out.cout) * n * cells * d * d;
  auto run = [&]() -> absl::Status {
    ARGEN_CUDA_RETURN(cudaSetDevice(s.gpu.device()), "VAE decode: set device");
    // CHW per latent -> channel-major [z][n*cells].
    float* staged = s.latent_host.as<float>();
    for (int32_t c = 0; c < z; ++c) {
      for (int32_t i = 0; i < n; ++i) {
        std::memcpy(staged + (static_cast<size_t>(c) * n + i) * cells, latents[i]->chw.data() + c * cells,
                    cells * sizeof(float));
      }
    }
    ARGEN_CUDA_RETURN(
        cudaMemcpyAsync(s.a, staged, z * n * cells * sizeof(float), cudaMemcpyHostToDevice, s.gpu.stream()),
        "VAE decode: upload latents");
    ARGEN_STATUS_RETURN(s.Network(n, h, w));
    ARGEN_CUDA_RETURN(
        cudaMemcpyAsync(s.out_host.as(), s.b, out_floats * sizeof(float), cudaMemcpyDeviceToHost, s.gpu.stream()),
        "VAE decode: download floats");
    ARGEN_CUDA_RETURN(cudaStreamSynchronize(s.gpu.stream()), "VAE decode: synchronize");
    return absl::OkStatus();
  };
  absl::Status st = run();
  // Whatever was queued finishes before the staging buffers are reused.
  if (!st.ok()) cudaStreamSynchronize(s.gpu.stream());
  return st;
}

absl::Status CudaVaeDecoder::DecodeToFloat(const std::vector<LatentGrid>& latents,
                                           std::vector<std::vector<float>>* chw) {
  for (size_t i = 0; i < latents.size(); ++i) {
    if (absl::Status st = Validate(latents[i], i); !st.ok()) return st;
  }
  // Latent indices by size, in call order within a size, split into chunks.
  std::map<std::pair<int32_t, int32_t>, std::vector<size_t>> by_size;
  std::vector<std::pair<int32_t, int32_t>> order;  // sizes in order of first appearance
  for (size_t i = 0; i < latents.size(); ++i) {
    auto [it, inserted] = by_size.try_emplace({latents[i].height, latents[i].width});
    if (inserted) order.push_back(it->first);
    it->second.push_back(i);
  }
  const size_t d = static_cast<size_t>(s_->config.downsample());
  const size_t out_ch = static_cast<size_t>(s_->conv_out.cout);
  chw->assign(latents.size(), {});
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& size : order) {
    const std::vector<size_t>& all = by_size[size];
    const size_t hw = static_cast<size_t>(size.first) * size.second * d * d;
    for (size_t begin = 0; begin < all.size(); begin += s_->chunk) {
      const size_t end = std::min(all.size(), begin + static_cast<size_t>(s_->chunk));
      std::vector<const LatentGrid*> members;
      for (size_t j = begin; j < end; ++j) members.push_back(&latents[all[j]]);
      if (absl::Status st = RunChunk(members); !st.ok()) return st;
      // [out_ch][n*hw] -> per latent [out_ch][hw].
      const size_t n = members.size();
      const float* out = s_->out_host.as<float>();
      for (size_t j = 0; j < n; ++j) {
        std::vector<float>& img = (*chw)[all[begin + j]];
        img.resize(out_ch * hw);
        for (size_t c = 0; c < out_ch; ++c) {
          std::memcpy(img.data() + c * hw, out + (c * n + j) * hw, hw * sizeof(float));
        }
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace argen::vq
