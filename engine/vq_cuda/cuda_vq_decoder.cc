#include "engine/vq_cuda/cuda_vq_decoder.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cuda/cuda_status.h"
#include "engine/cuda/device_buffer.h"
#include "engine/vq/group_norm.h"
#include "engine/vq_cuda/bf16_vq_network.h"
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

constexpr int32_t kMaxChunkImages = 4096;

// Device weights as offsets (floats) into the one uploaded blob.
using DConv = BlobConv;
using DNorm = BlobGroupNorm;
using DRes = BlobResnet;
using DAttn = BlobAttn;
struct DBlock {
  std::vector<DRes> res;
  std::vector<DAttn> attn;
  bool has_upsample = false;
  DConv upsample;
};

using Blob = VqganWeightBlob;

// Per-image float counts of the decode's buffers, walked like the CPU decoder's ScratchPlan.
struct Plan {
  size_t act = 0;      // largest activation, c * h * w
  size_t col = 0;      // largest 3x3 im2col matrix of one image, cin * 9 * h * w
  size_t min_col = 0;  // one output row of the widest 3x3 conv: the smallest band allowed
  size_t max_hw = 0;   // largest h * w
  void Conv(const DConv& c, int32_t h, int32_t w) {
    const size_t hw = static_cast<size_t>(h) * w;
    act = std::max({act, c.cin * hw, c.cout * hw});
    max_hw = std::max(max_hw, hw);
    if (c.kernel == 3) {
      col = std::max(col, static_cast<size_t>(c.cin) * 9 * hw);
      min_col = std::max(min_col, static_cast<size_t>(c.cin) * 9 * w);
    }
  }
  void Res(const DRes& r, int32_t h, int32_t w) {
    Conv(r.conv1, h, w);
    Conv(r.conv2, h, w);
    if (r.has_nin) Conv(r.nin, h, w);
  }
};

absl::Status Alloc(DeviceBuffer& buf, size_t bytes, const char* what) {
  auto b = DeviceBuffer::Allocate(bytes, absl::StrCat("CudaVqDecoder: ", what));
  if (!b.ok()) return b.status();
  buf = std::move(*b);
  return absl::OkStatus();
}

absl::Status Pin(PinnedBuffer& buf, size_t bytes, const char* what) {
  auto b = PinnedBuffer::Allocate(bytes, absl::StrCat("CudaVqDecoder: ", what));
  if (!b.ok()) return b.status();
  buf = std::move(*b);
  return absl::OkStatus();
}

}  // namespace

const char* VqPrecisionName(VqPrecision p) {
  switch (p) {
    case VqPrecision::kFp32:
      return "fp32";
    case VqPrecision::kTf32:
      return "tf32";
    case VqPrecision::kBf16:
      return "bf16";
  }
  return "?";
}

struct CudaVqDecoder::State {
  vq::Vq16Config config;
  CudaVqOptions options;

  int32_t codebook_size = 0, embed_dim = 0;
  size_t codebook = 0;
  DConv post_quant_conv, conv_in, conv_out;
  DRes mid_res0, mid_res1;
  DAttn mid_attn;
  std::vector<DBlock> blocks;
  DNorm norm_out;

  int32_t chunk = 1;
  size_t act_floats = 0;    // per buffer, whole chunk
  size_t col_floats = 0;    // im2col band
  size_t attn_floats = 0;   // q, k, v each, whole chunk
  size_t score_floats = 0;  // whole chunk
  DeviceBuffer weights, buf_x, buf_a, buf_b, col, q, k, v, scores, tokens_dev, rgb_dev;
  PinnedBuffer tokens_host, rgb_host, float_host;
  float *x = nullptr, *a = nullptr, *b = nullptr;  // the three activations (x the running one)
  VqPrecision precision = VqPrecision::kFp32;      // the path that runs
  std::string fallback_reason;
  std::unique_ptr<Bf16VqNetwork> bf16;  // the bf16 path, when it runs
  // Last, so it is destroyed first: the stream is drained and the handle gone
  // before the buffers above are freed (the order before the fold).
  SideCublasStream gpu;

  // fp32 planar [3][n*S*S] output of the last network run.
  const float* output() const { return bf16 ? bf16->output() : b; }

  ~State() {
    if (gpu.stream()) cudaStreamSynchronize(gpu.stream());
    bf16.reset();  // its cuDNN handle and buffers go before the stream (gpu, destroyed next)
  }

  const float* P(size_t off) const { return weights.as<float>() + off; }
  int32_t grid() const { return config.token_grid(); }
  int32_t side() const { return config.image_size; }

  absl::Status Check(cudaError_t err, const char* what) const { return CudaStatus(err, what); }

  Fp32BlockContext Blocks() const {
    return {{gpu.stream(), gpu.cublas(), col.as<float>(), col_floats},
            weights.as<float>(),
            config.num_groups,
            q.as<float>(),
            k.as<float>(),
            v.as<float>(),
            scores.as<float>()};
  }

  absl::Status Conv(const DConv& c, const float* in, int32_t n, int32_t h, int32_t w, float* out, bool accumulate,
                    const char* what) {
    return Fp32BlobConv(Blocks(), c, in, n, h, w, out, accumulate, what);
  }
  absl::Status Norm(const DNorm& nw, const float* in, int32_t n, int64_t hw, float* out, bool swish, const char* what) {
    return Fp32GroupNorm(Blocks(), nw, in, n, hw, out, swish, what);
  }
  absl::Status Resnet(const DRes& r, int32_t n, int32_t h, int32_t w) {
    return Fp32ResnetBlock(Blocks(), r, x, a, b, n, h, w);
  }
  absl::Status Attn(const DAttn& at, int32_t n, int32_t h, int32_t w) {
    return Fp32AttnBlock(Blocks(), at, x, a, n, h, w);
  }

  // The network on n validated grids already in tokens_dev; leaves [3][n*S*S] in b.
  absl::Status Network(int32_t n) {
    const int32_t g = grid();
    const int64_t cells = static_cast<int64_t>(g) * g * n;
    ARGEN_STATUS_RETURN(Check(kernels::VqCodebookLookup(P(codebook), codebook_size, embed_dim, tokens_dev.as<int32_t>(),
                                                        cells, b, gpu.stream()),
                              "codebook lookup"));
    ARGEN_STATUS_RETURN(Conv(post_quant_conv, b, n, g, g, a, false, "post_quant_conv"));
    ARGEN_STATUS_RETURN(Conv(conv_in, a, n, g, g, x, false, "conv_in"));
    ARGEN_STATUS_RETURN(Resnet(mid_res0, n, g, g));
    ARGEN_STATUS_RETURN(Attn(mid_attn, n, g, g));
    ARGEN_STATUS_RETURN(Resnet(mid_res1, n, g, g));
    int32_t s = g;
    for (const DBlock& block : blocks) {
      for (size_t j = 0; j < block.res.size(); ++j) {
        ARGEN_STATUS_RETURN(Resnet(block.res[j], n, s, s));
        if (!block.attn.empty()) ARGEN_STATUS_RETURN(Attn(block.attn[j], n, s, s));
      }
      if (block.has_upsample) {
        ARGEN_STATUS_RETURN(
            Check(kernels::VqUpsampleNearest2x(x, block.upsample.cin, n, s, s, a, gpu.stream()), "upsample"));
        s *= 2;
        ARGEN_STATUS_RETURN(Conv(block.upsample, a, n, s, s, x, false, "upsample conv"));
      }
    }
    ARGEN_STATUS_RETURN(Norm(norm_out, x, n, static_cast<int64_t>(s) * s, a, true, "norm_out"));
    return Conv(conv_out, a, n, s, s, b, false, "conv_out");
  }
};

absl::StatusOr<std::unique_ptr<CudaVqDecoder>> CudaVqDecoder::Create(const checkpoint::Checkpoint& checkpoint,
                                                                     const vq::Vq16Config& config,
                                                                     const CudaVqOptions& options) {
  auto weights = LoadVqDecoderWeights(checkpoint, config);
  if (!weights.ok()) return weights.status();
  return Create(std::move(*weights), config, options);
}

// The fp32 / TF32 path: the weight blob, the chunk from the workspace limit, its buffers.
absl::Status CudaVqDecoder::SetupFp32(State& st, const VqDecoderWeights& weights) {
  State* s = &st;
  const vq::Vq16Config& config = s->config;
  const CudaVqOptions& options = s->options;
  // Host blob of every weight, in one upload.
  Blob blob;
  s->codebook = blob.Add(weights.codebook);
  s->post_quant_conv = blob.Conv(weights.post_quant_conv);
  s->conv_in = blob.Conv(weights.conv_in);
  s->mid_res0 = blob.Res(weights.mid_res0);
  s->mid_attn = blob.Attn(weights.mid_attn);
  s->mid_res1 = blob.Res(weights.mid_res1);
  for (const UpBlockWeights& up : weights.blocks) {
    DBlock d;
    for (const ResnetBlockWeights& r : up.res) d.res.push_back(blob.Res(r));
    for (const AttnBlockWeights& at : up.attn) d.attn.push_back(blob.Attn(at));
    if (up.upsample) {
      d.has_upsample = true;
      d.upsample = blob.Conv(*up.upsample);
    }
    s->blocks.push_back(std::move(d));
  }
  s->norm_out = blob.Norm(weights.norm_out);
  s->conv_out = blob.Conv(weights.conv_out);

  // Per-image sizes; attention sits at the token grid (mid and the first up block).
  const int32_t g = config.token_grid();
  Plan plan;
  plan.Conv(s->post_quant_conv, g, g);
  plan.Conv(s->conv_in, g, g);
  plan.Res(s->mid_res0, g, g);
  plan.Res(s->mid_res1, g, g);
  size_t attn_channels = s->mid_attn.q.cout;
  int32_t side = g;
  for (const DBlock& block : s->blocks) {
    for (const DRes& r : block.res) plan.Res(r, side, side);
    for (const DAttn& at : block.attn) attn_channels = std::max<size_t>(attn_channels, at.q.cout);
    if (block.has_upsample) {
      side *= 2;
      plan.Conv(block.upsample, side, side);
    }
  }
  plan.Conv(s->conv_out, side, side);
  const size_t cells = static_cast<size_t>(g) * g;
  const size_t attn_per_image = attn_channels * cells;
  const size_t scores_per_image = cells * cells;
  const size_t per_image_bytes = sizeof(float) * (3 * plan.act + 3 * attn_per_image + scores_per_image);
  const size_t limit = static_cast<size_t>(options.workspace_bytes);

  // Images per chunk: activations take at most half the limit; cuBLAS dimensions are ints.
  size_t chunk = std::min<size_t>(options.max_images_per_chunk, std::max<size_t>(1, limit / 2 / per_image_bytes));
  chunk = std::min(chunk, static_cast<size_t>(INT_MAX) / plan.max_hw);  // m = chunk * hw is a GEMM dimension
  chunk = std::max<size_t>(chunk, 1);
  const size_t min_bytes = per_image_bytes + sizeof(float) * plan.min_col;
  if (chunk * per_image_bytes + sizeof(float) * plan.min_col > limit) {
    return absl::ResourceExhaustedError(absl::StrCat("CudaVqDecoder: workspace_bytes ", options.workspace_bytes,
                                                     " is too small: one ", config.image_size,
                                                     " px image needs at least ", min_bytes, " bytes"));
  }
  s->chunk = static_cast<int32_t>(chunk);
  s->act_floats = plan.act * chunk;
  s->attn_floats = attn_per_image * chunk;
  s->score_floats = scores_per_image * chunk;
  // The im2col band: the whole chunk's columns when they fit, else what is left (>= one output row).
  s->col_floats = std::max(plan.min_col, std::min(plan.col * chunk, (limit - chunk * per_image_bytes) / sizeof(float)));

  ARGEN_STATUS_RETURN(Alloc(s->weights, blob.data().size() * sizeof(float), "weights"));
  ARGEN_STATUS_RETURN(Alloc(s->buf_x, s->act_floats * sizeof(float), "activation x"));
  ARGEN_STATUS_RETURN(Alloc(s->buf_a, s->act_floats * sizeof(float), "activation a"));
  ARGEN_STATUS_RETURN(Alloc(s->buf_b, s->act_floats * sizeof(float), "activation b"));
  ARGEN_STATUS_RETURN(Alloc(s->col, s->col_floats * sizeof(float), "im2col band"));
  ARGEN_STATUS_RETURN(Alloc(s->q, s->attn_floats * sizeof(float), "attention q"));
  ARGEN_STATUS_RETURN(Alloc(s->k, s->attn_floats * sizeof(float), "attention k"));
  ARGEN_STATUS_RETURN(Alloc(s->v, s->attn_floats * sizeof(float), "attention v"));
  ARGEN_STATUS_RETURN(Alloc(s->scores, s->score_floats * sizeof(float), "attention scores"));
  ARGEN_CUDA_RETURN(cudaMemcpyAsync(s->weights.as(), blob.data().data(), blob.data().size() * sizeof(float),
                                    cudaMemcpyHostToDevice, s->gpu.stream()),
                    "CudaVqDecoder: upload weights");
  ARGEN_CUDA_RETURN(cudaStreamSynchronize(s->gpu.stream()), "CudaVqDecoder: upload weights");
  s->x = s->buf_x.as<float>();
  s->a = s->buf_a.as<float>();
  s->b = s->buf_b.as<float>();
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<CudaVqDecoder>> CudaVqDecoder::Create(VqDecoderWeights weights,
                                                                     const vq::Vq16Config& config,
                                                                     const CudaVqOptions& options) {
  if (options.max_images_per_chunk < 1 || options.max_images_per_chunk > kMaxChunkImages) {
    return absl::InvalidArgumentError(absl::StrCat("CudaVqDecoder: max_images_per_chunk must be in [1, ",
                                                   kMaxChunkImages, "], got ", options.max_images_per_chunk));
  }
  if (options.workspace_bytes <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaVqDecoder: workspace_bytes must be > 0, got ", options.workspace_bytes));
  }
  if (options.precision != VqPrecision::kFp32 && options.precision != VqPrecision::kTf32 &&
      options.precision != VqPrecision::kBf16) {
    return absl::InvalidArgumentError("CudaVqDecoder: precision must be fp32, tf32 or bf16");
  }
  if (options.cudnn_workspace_bytes < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("CudaVqDecoder: cudnn_workspace_bytes must be >= 0, got ", options.cudnn_workspace_bytes));
  }
  if (absl::Status s = ValidateVqConfig(config); !s.ok()) return s;
  if (weights.blocks.size() != config.ch_mult.size() || weights.codebook_size != config.codebook_size ||
      weights.embed_dim != config.codebook_embed_dim ||
      weights.codebook.size() != static_cast<size_t>(config.codebook_size) * config.codebook_embed_dim) {
    return absl::InvalidArgumentError(
        "CudaVqDecoder: weights do not match gen_vision_config (codebook or ch_mult levels differ)");
  }

  auto s = std::make_unique<State>();
  s->config = config;
  s->options = options;
  s->codebook_size = weights.codebook_size;
  s->embed_dim = weights.embed_dim;

  ARGEN_STATUS_RETURN(s->gpu.Init("CudaVqDecoder", /*tf32=*/options.precision == VqPrecision::kTf32));

  if (options.precision == VqPrecision::kBf16) {
    Bf16VqOptions bo;
    bo.max_images_per_chunk = options.max_images_per_chunk;
    bo.workspace_bytes = options.workspace_bytes;
    bo.cudnn_workspace_bytes = options.cudnn_workspace_bytes;
    bo.benchmark_algorithms = options.benchmark_algorithms;
    absl::StatusOr<std::unique_ptr<Bf16VqNetwork>> net =
        Bf16VqNetwork::Create(weights, config, bo, s->gpu.stream(), s->gpu.cublas());
    if (net.ok()) {
      s->bf16 = std::move(*net);
      s->precision = VqPrecision::kBf16;
      s->chunk = s->bf16->chunk();
    } else if (!options.fallback_to_fp32 || net.status().code() == absl::StatusCode::kResourceExhausted) {
      return absl::Status(net.status().code(), absl::StrCat("CudaVqDecoder: bf16 path: ", net.status().message()));
    } else {
      cudaGetLastError();  // a launch error of the failed path must not surface later
      s->fallback_reason = absl::StrCat(absl::StatusCodeToString(net.status().code()), ": ", net.status().message());
      std::fprintf(stderr, "argen: VQ decoder: the bf16 path cannot run here (%s); decoding in fp32\n",
                   s->fallback_reason.c_str());
    }
  }
  if (s->bf16 == nullptr) {
    s->precision = options.precision == VqPrecision::kTf32 ? VqPrecision::kTf32 : VqPrecision::kFp32;
    ARGEN_STATUS_RETURN(SetupFp32(*s, weights));
  }

  const size_t cells = static_cast<size_t>(config.token_grid()) * config.token_grid();
  const size_t pixels = static_cast<size_t>(config.image_size) * config.image_size * s->chunk;
  ARGEN_STATUS_RETURN(Alloc(s->tokens_dev, cells * s->chunk * sizeof(int32_t), "tokens"));
  ARGEN_STATUS_RETURN(Alloc(s->rgb_dev, pixels * 3, "rgb8"));
  ARGEN_STATUS_RETURN(Pin(s->tokens_host, cells * s->chunk * sizeof(int32_t), "tokens"));
  ARGEN_STATUS_RETURN(Pin(s->rgb_host, pixels * 3, "rgb8"));
  ARGEN_STATUS_RETURN(Pin(s->float_host, pixels * 3 * sizeof(float), "float pixels"));
  return std::unique_ptr<CudaVqDecoder>(new CudaVqDecoder(std::move(s)));
}

CudaVqDecoder::CudaVqDecoder(std::unique_ptr<State> state) : s_(std::move(state)) {}
CudaVqDecoder::~CudaVqDecoder() = default;

int32_t CudaVqDecoder::image_size() const { return s_->config.image_size; }
int32_t CudaVqDecoder::token_grid() const { return s_->config.token_grid(); }
int32_t CudaVqDecoder::codebook_size() const { return s_->config.codebook_size; }
int32_t CudaVqDecoder::chunk_images() const { return s_->chunk; }
size_t CudaVqDecoder::scratch_bytes() const {
  if (s_->bf16) return s_->bf16->scratch_bytes();
  return sizeof(float) * (3 * s_->act_floats + s_->col_floats + 3 * s_->attn_floats + s_->score_floats);
}
size_t CudaVqDecoder::weight_bytes() const { return s_->bf16 ? s_->bf16->weight_bytes() : s_->weights.bytes(); }
VqPrecision CudaVqDecoder::precision() const { return s_->precision; }
const std::string& CudaVqDecoder::fallback_reason() const { return s_->fallback_reason; }
std::string CudaVqDecoder::description() const {
  if (s_->bf16) return s_->bf16->description();
  std::string d = absl::StrCat(VqPrecisionName(s_->precision), " [C][N*H*W]: chunk ", s_->chunk, ", scratch ",
                               scratch_bytes() >> 20, " MiB, weights ", weight_bytes() >> 20, " MiB");
  if (!s_->fallback_reason.empty()) absl::StrAppend(&d, " (bf16 fell back: ", s_->fallback_reason, ")");
  return d;
}

// The CPU decoder's checks and messages (VqDecoder::ValidateGrid), word for word.
absl::Status CudaVqDecoder::ValidateGrid(std::span<const int32_t> tokens, size_t grid_index) const {
  const int32_t g = s_->config.token_grid();
  if (tokens.size() != static_cast<size_t>(g) * g) {
    return absl::InvalidArgumentError(absl::StrCat("VQ decode: token grid ", grid_index, " has ", tokens.size(),
                                                   " tokens, expected ", g * g, " (", g, " x ", g, ")"));
  }
  for (size_t p = 0; p < tokens.size(); ++p) {
    if (tokens[p] < 0 || tokens[p] >= s_->config.codebook_size) {
      return absl::InvalidArgumentError(absl::StrCat("VQ decode: token grid ", grid_index, ", position ", p, ": id ",
                                                     tokens[p], " outside the codebook [0, ", s_->config.codebook_size,
                                                     ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status CudaVqDecoder::RunChunk(const std::vector<std::span<const int32_t>>& grids, bool rgb) {
  State& s = *s_;
  const int32_t n = static_cast<int32_t>(grids.size());
  const size_t cells = static_cast<size_t>(s.grid()) * s.grid();
  const size_t hw = static_cast<size_t>(s.side()) * s.side();
  auto run = [&]() -> absl::Status {
    ARGEN_CUDA_RETURN(cudaSetDevice(s.gpu.device()), "VQ decode: set device");
    int32_t* staged = s.tokens_host.as<int32_t>();
    for (int32_t i = 0; i < n; ++i) std::memcpy(staged + i * cells, grids[i].data(), cells * sizeof(int32_t));
    ARGEN_CUDA_RETURN(
        cudaMemcpyAsync(s.tokens_dev.as(), staged, n * cells * sizeof(int32_t), cudaMemcpyHostToDevice, s.gpu.stream()),
        "VQ decode: upload tokens");
    if (s.bf16) {
      ARGEN_STATUS_RETURN(s.bf16->Run(s.tokens_dev.as<int32_t>(), n));
    } else {
      ARGEN_STATUS_RETURN(s.Network(n));
    }
    if (rgb) {
      ARGEN_CUDA_RETURN(
          kernels::VqToRgb8(s.output(), n, static_cast<int64_t>(hw), s.rgb_dev.as<uint8_t>(), s.gpu.stream()),
          "VQ decode: rgb8");
      ARGEN_CUDA_RETURN(
          cudaMemcpyAsync(s.rgb_host.as(), s.rgb_dev.as(), n * hw * 3, cudaMemcpyDeviceToHost, s.gpu.stream()),
          "VQ decode: download rgb8");
    } else {
      ARGEN_CUDA_RETURN(cudaMemcpyAsync(s.float_host.as(), s.output(), n * hw * 3 * sizeof(float),
                                        cudaMemcpyDeviceToHost, s.gpu.stream()),
                        "VQ decode: download floats");
    }
    ARGEN_CUDA_RETURN(cudaStreamSynchronize(s.gpu.stream()), "VQ decode: synchronize");
    return absl::OkStatus();
  };
  absl::Status st = run();
  // Whatever was queued finishes before the staging buffers are reused.
  if (!st.ok()) cudaStreamSynchronize(s.gpu.stream());
  return st;
}

absl::StatusOr<std::vector<engine::RgbImage>> CudaVqDecoder::Decode(
    const std::vector<std::vector<int32_t>>& token_grids) {
  for (size_t i = 0; i < token_grids.size(); ++i) {
    if (absl::Status st = ValidateGrid(token_grids[i], i); !st.ok()) return st;
  }
  const int32_t side = image_size();
  const size_t bytes = 3 * static_cast<size_t>(side) * side;
  std::vector<engine::RgbImage> images(token_grids.size());
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t begin = 0; begin < token_grids.size(); begin += s_->chunk) {
    const size_t end = std::min(token_grids.size(), begin + static_cast<size_t>(s_->chunk));
    std::vector<std::span<const int32_t>> grids(token_grids.begin() + begin, token_grids.begin() + end);
    if (absl::Status st = RunChunk(grids, /*rgb=*/true); !st.ok()) return st;
    const uint8_t* rgb = s_->rgb_host.as<uint8_t>();
    for (size_t i = begin; i < end; ++i) {
      images[i].width = side;
      images[i].height = side;
      images[i].rgb.assign(rgb + (i - begin) * bytes, rgb + (i - begin + 1) * bytes);
    }
  }
  return images;
}

absl::Status CudaVqDecoder::DecodeToFloatBatch(const std::vector<std::vector<int32_t>>& token_grids,
                                               std::vector<std::vector<float>>* chw) {
  for (size_t i = 0; i < token_grids.size(); ++i) {
    if (absl::Status st = ValidateGrid(token_grids[i], i); !st.ok()) return st;
  }
  const size_t hw = static_cast<size_t>(image_size()) * image_size();
  chw->assign(token_grids.size(), {});
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t begin = 0; begin < token_grids.size(); begin += s_->chunk) {
    const size_t end = std::min(token_grids.size(), begin + static_cast<size_t>(s_->chunk));
    const size_t n = end - begin;
    std::vector<std::span<const int32_t>> grids(token_grids.begin() + begin, token_grids.begin() + end);
    if (absl::Status st = RunChunk(grids, /*rgb=*/false); !st.ok()) return st;
    // [3][n*hw] -> per image [3][hw].
    const float* out = s_->float_host.as<float>();
    for (size_t i = 0; i < n; ++i) {
      std::vector<float>& img = (*chw)[begin + i];
      img.resize(3 * hw);
      for (size_t c = 0; c < 3; ++c) std::memcpy(img.data() + c * hw, out + c * n * hw + i * hw, hw * sizeof(float));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> CudaVqDecoder::Profile(int32_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!s_->bf16) return absl::FailedPreconditionError("CudaVqDecoder: Profile is for the bf16 path");
  return s_->bf16->Profile(n);
}

absl::Status CudaVqDecoder::DecodeToFloat(std::span<const int32_t> tokens, std::vector<float>* chw) {
  if (absl::Status st = ValidateGrid(tokens, 0); !st.ok()) return st;
  std::vector<std::vector<float>> out;
  ARGEN_STATUS_RETURN(DecodeToFloatBatch({std::vector<int32_t>(tokens.begin(), tokens.end())}, &out));
  *chw = std::move(out[0]);
  return absl::OkStatus();
}

}  // namespace argen::vq
