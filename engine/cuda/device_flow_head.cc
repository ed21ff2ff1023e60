#include "engine/cuda/device_flow_head.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/bf16.h"
#include "engine/cuda/cuda_status.h"
#include "kernels/elementwise.h"
#include "kernels/flow_head_gemm.h"
#include "kernels/flow_head_kernels.h"

namespace argen::cuda {
namespace {

using Linear = model::FlowMatchingHeadDesc::Linear;

absl::Status CheckLinear(const Linear& l, int32_t out, int32_t in, const std::string& name) {
  if (l.out != out || l.in != in || l.weight.size() != static_cast<size_t>(out) * in ||
      l.bias.size() != static_cast<size_t>(out)) {
    return absl::InvalidArgumentError(absl::StrCat("device flow head: ", name, " is [", l.out, " x ", l.in, "] with ",
                                                   l.weight.size(), " weights and ", l.bias.size(),
                                                   " biases; expected [", out, " x ", in, "] and ", out, " biases"));
  }
  return absl::OkStatus();
}

absl::Status CheckVector(std::span<const float> v, int32_t n, const std::string& name) {
  if (v.size() != static_cast<size_t>(n)) {
    return absl::InvalidArgumentError(
        absl::StrCat("device flow head: ", name, " has ", v.size(), " values, expected ", n));
  }
  return absl::OkStatus();
}

// Where each tensor goes in the one weight allocation: bf16 matrices or f32
// vectors, each the concatenation of its parts, 256-byte aligned.
class WeightLayout {
 public:
  void Add(bool bf16, std::vector<std::span<const float>> parts, const void** target) {
    size_t count = 0;
    for (std::span<const float> p : parts) count += p.size();
    entries_.push_back({total_, bf16, std::move(parts), target});
    total_ += (count * (bf16 ? 2 : 4) + 255) / 256 * 256;
  }
  size_t total() const { return total_; }

  absl::Status Upload(char* base) const {
    std::vector<uint16_t> bits;
    for (const Entry& e : entries_) {
      *e.target = base + e.offset;
      size_t at = 0;
      for (std::span<const float> p : e.parts) {
        if (e.bf16) {
          bits.resize(p.size());
          for (size_t i = 0; i < p.size(); ++i) bits[i] = FloatToBf16Bits(p[i]);
          ARGEN_CUDA_RETURN(cudaMemcpy(base + e.offset + at * 2, bits.data(), p.size() * 2, cudaMemcpyHostToDevice),
                            "upload flow head weight");
        } else {
          ARGEN_CUDA_RETURN(cudaMemcpy(base + e.offset + at * 4, p.data(), p.size() * 4, cudaMemcpyHostToDevice),
                            "upload flow head weight");
        }
        at += p.size();
      }
    }
    return absl::OkStatus();
  }

 private:
  struct Entry {
    size_t offset;
    bool bf16;
    std::vector<std::span<const float>> parts;
    const void** target;
  };
  size_t total_ = 0;
  std::vector<Entry> entries_;
};

template <typename T>
const void** Slot(const T** p) {
  return reinterpret_cast<const void**>(p);
}

}  // namespace

absl::StatusOr<std::unique_ptr<DeviceFlowHead>> DeviceFlowHead::Create(const model::FlowMatchingHeadDesc& desc) {
  const int32_t D = desc.token_dim, C = desc.cond_dim, W = desc.width, B = static_cast<int32_t>(desc.blocks.size());
  if (D <= 0 || C <= 0 || W <= 0 || B <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("device flow head: token_dim ", D, ", cond_dim ", C, ", width ", W,
                                                   " and ", B, " blocks must all be positive"));
  }
  ARGEN_STATUS_RETURN(CheckLinear(desc.cond_embed, W, C, "cond_embed"));
  ARGEN_STATUS_RETURN(CheckLinear(desc.input_proj, W, D, "input_proj"));
  for (int32_t b = 0; b < B; ++b) {
    const model::FlowMatchingHeadDesc::Block& blk = desc.blocks[b];
    const std::string p = absl::StrCat("res_blocks.", b, ".");
    ARGEN_STATUS_RETURN(CheckVector(blk.ln_weight, W, p + "in_ln.weight"));
    ARGEN_STATUS_RETURN(CheckVector(blk.ln_bias, W, p + "in_ln.bias"));
    ARGEN_STATUS_RETURN(CheckLinear(blk.fc1, W, W, p + "mlp.0"));
    ARGEN_STATUS_RETURN(CheckLinear(blk.fc2, W, W, p + "mlp.2"));
    ARGEN_STATUS_RETURN(CheckLinear(blk.ada, 3 * W, W, p + "adaLN_modulation.1"));
  }
  ARGEN_STATUS_RETURN(CheckLinear(desc.final_ada, 2 * W, W, "final_layer.adaLN_modulation.1"));
  ARGEN_STATUS_RETURN(CheckLinear(desc.final_linear, D, W, "final_layer.linear"));
  const int32_t S = static_cast<int32_t>(desc.times.size());
  if (S < 2 || desc.time_embeddings.size() != static_cast<size_t>(S) * W) {
    return absl::InvalidArgumentError(absl::StrCat("device flow head: ", S, " grid times (>= 2) with ",
                                                   desc.time_embeddings.size(), " time-embedding values (", W,
                                                   " a time)"));
  }
  if (!kernels::FlowGemmShapeSupported(D, W) || !kernels::FlowGemmShapeSupported(W, W) || W > 8192) {
    return absl::InvalidArgumentError(absl::StrCat("device flow head: token_dim ", D, " and width ", W,
                                                   " must be multiples of 8 of at most ", kernels::kFlowGemmMaxK,
                                                   " (the fused GEMM holds a whole weight row in shared memory)"));
  }
  if (!(desc.last_step_size > 0 && desc.last_step_size < 1)) {
    return absl::InvalidArgumentError("device flow head: last_step_size must lie in (0, 1)");
  }

  std::unique_ptr<DeviceFlowHead> h(new DeviceFlowHead());
  h->dims_ = {D, C, W, B, int64_t{3 * B + 2} * W};
  // The sampler's coefficients in float, as FlowHead::Sample computes them.
  for (int32_t k = 0; k + 1 < S; ++k) {
    kernels::FlowStep s;
    s.t = desc.times[k];
    s.dt = desc.times[k + 1] - desc.times[k];
    s.sigma = 1.0f - s.t;
    s.var = s.sigma * s.sigma + s.t * s.sigma;
    s.sqrt_dt = std::sqrt(s.dt);
    s.diffusion = std::sqrt(2.0f * s.sigma);
    s.draw = static_cast<uint32_t>(k + 1);
    h->steps_.push_back(s);
  }
  h->last_step_size_ = desc.last_step_size;
  h->normalize_ = desc.normalize;
  h->time_embedding_ = desc.time_embedding;

  WeightLayout layout;
  layout.Add(true, {desc.cond_embed.weight}, Slot(&h->cond_embed_w_));
  layout.Add(false, {desc.cond_embed.bias}, Slot(&h->cond_embed_b_));
  layout.Add(true, {desc.input_proj.weight}, Slot(&h->input_proj_w_));
  layout.Add(false, {desc.input_proj.bias}, Slot(&h->input_proj_b_));
  std::vector<std::span<const float>> ada_w, ada_b;
  for (const model::FlowMatchingHeadDesc::Block& blk : desc.blocks) {
    ada_w.push_back(blk.ada.weight);
    ada_b.push_back(blk.ada.bias);
  }
  ada_w.push_back(desc.final_ada.weight);
  ada_b.push_back(desc.final_ada.bias);
  layout.Add(true, std::move(ada_w), Slot(&h->ada_w_));
  layout.Add(false, std::move(ada_b), Slot(&h->ada_b_));
  h->blocks_.resize(B);
  for (int32_t b = 0; b < B; ++b) {
    const model::FlowMatchingHeadDesc::Block& blk = desc.blocks[b];
    Block& out = h->blocks_[b];
    layout.Add(false, {blk.ln_weight}, Slot(&out.ln_weight));
    layout.Add(false, {blk.ln_bias}, Slot(&out.ln_bias));
    layout.Add(true, {blk.fc1.weight}, Slot(&out.fc1_w));
    layout.Add(false, {blk.fc1.bias}, Slot(&out.fc1_b));
    layout.Add(true, {blk.fc2.weight}, Slot(&out.fc2_w));
    layout.Add(false, {blk.fc2.bias}, Slot(&out.fc2_b));
  }
  layout.Add(true, {desc.final_linear.weight}, Slot(&h->final_w_));
  layout.Add(false, {desc.final_linear.bias}, Slot(&h->final_b_));
  layout.Add(false, {desc.time_embeddings}, Slot(&h->time_table_));
  absl::StatusOr<DeviceBuffer> weights = DeviceBuffer::Allocate(layout.total(), "flow head weights");
  if (!weights.ok()) return weights.status();
  h->weights_ = *std::move(weights);
  ARGEN_STATUS_RETURN(layout.Upload(h->weights_.as<char>()));

  // Workspaces of one chunk: 2 kChunkPairs rows.
  const int64_t R = 2 * kChunkPairs, M = h->dims_.mod_width;
  size_t total = 0;
  const auto carve = [&total](int64_t bytes) {
    const size_t at = total;
    total += (static_cast<size_t>(bytes) + 255) / 256 * 256;
    return at;
  };
  static_assert(kGroupRows == 4 * kChunkPairs, "a group's modulations fill the side stream's two buffers");
  const size_t cond_bf16 = carve(R * C * 2), silu_y = carve(int64_t{kGroupRows} * W * 2), x_in = carve(R * D * 2),
               hn = carve(R * W * 2), act_bf16 = carve(R * W * 2), c_emb = carve(R * W * 4),
               x = carve(int64_t{kChunkPairs} * D * 4), hs = carve(R * W * 4), act = carve(R * W * 4),
               mods = carve(int64_t{kGroupRows} * M * 4), v = carve(R * D * 4), temb = carve(int64_t{W} * 4);
  absl::StatusOr<DeviceBuffer> ws = DeviceBuffer::Allocate(total, "flow head workspaces");
  if (!ws.ok()) return ws.status();
  h->workspace_ = *std::move(ws);
  char* base = h->workspace_.as<char>();
  h->cond_bf16_ = reinterpret_cast<bf16*>(base + cond_bf16);
  h->silu_y_ = reinterpret_cast<bf16*>(base + silu_y);
  h->x_in_ = reinterpret_cast<bf16*>(base + x_in);
  h->hn_ = reinterpret_cast<bf16*>(base + hn);
  h->act_bf16_ = reinterpret_cast<bf16*>(base + act_bf16);
  h->c_emb_ = reinterpret_cast<float*>(base + c_emb);
  h->x_ = reinterpret_cast<float*>(base + x);
  h->h_ = reinterpret_cast<float*>(base + hs);
  h->act_ = reinterpret_cast<float*>(base + act);
  h->mod_[0] = reinterpret_cast<float*>(base + mods);
  h->mod_[1] = h->mod_[0] + R * M;
  h->v_ = reinterpret_cast<float*>(base + v);
  h->temb_ = reinterpret_cast<float*>(base + temb);

  // The highest priority, like the engine's decode stream: the chain waits on what it makes.
  int least = 0, greatest = 0;
  ARGEN_CUDA_RETURN(cudaDeviceGetStreamPriorityRange(&least, &greatest), "flow head stream priorities");
  ARGEN_CUDA_RETURN(cudaStreamCreateWithPriority(&h->side_stream_, cudaStreamNonBlocking, greatest),
                    "flow head side stream");
  ARGEN_STATUS_RETURN(h->side_gemm_.Init(h->side_stream_));
  for (cudaEvent_t* e : {&h->c_emb_ready_, &h->mod_ready_[0], &h->mod_ready_[1], &h->mod_free_[0], &h->mod_free_[1]}) {
    ARGEN_CUDA_RETURN(cudaEventCreateWithFlags(e, cudaEventDisableTiming), "flow head event");
  }
  return h;
}

absl::Status DeviceFlowHead::EnqueueCondEmbed(Gemm& gemm, cudaStream_t stream, int32_t rows) {
  const Dims& d = dims_;
  ARGEN_STATUS_RETURN(
      gemm.Linear(cond_bf16_, cond_embed_w_, rows, d.cond_dim, d.width, c_emb_, 0.f, "flow cond_embed"));
  ARGEN_CUDA_RETURN(kernels::AddBias(c_emb_, cond_embed_b_, rows, d.width, stream), "flow cond_embed bias");
  return absl::OkStatus();
}

DeviceFlowHead::~DeviceFlowHead() {
  if (side_stream_ != nullptr) cudaStreamSynchronize(side_stream_);
  side_gemm_.Reset();
  for (cudaEvent_t e : {c_emb_ready_, mod_ready_[0], mod_ready_[1], mod_free_[0], mod_free_[1]}) {
    if (e != nullptr) cudaEventDestroy(e);
  }
  if (side_stream_ != nullptr) cudaStreamDestroy(side_stream_);
}

absl::Status DeviceFlowHead::EnqueueModulations(Gemm& gemm, cudaStream_t stream, int32_t rows, const float* temb,
                                                float* mod) {
  const int32_t W = dims_.width;
  ARGEN_CUDA_RETURN(kernels::FlowSiluCondition(temb, 1, c_emb_, rows, W, silu_y_, stream), "flow silu(y)");
  return gemm.Linear(silu_y_, ada_w_, rows, W, static_cast<int>(dims_.mod_width), mod, 0.f, "flow adaLN modulations");
}

absl::Status DeviceFlowHead::EnqueueLinear(Gemm& gemm, cudaStream_t stream, const kernels::FlowGemmArgs& g,
                                           bool big_fused, const char* what) {
  using Gemms = FlowHeadTuning::Gemms;
  if (tuning_.gemms == Gemms::kFused || (tuning_.gemms == Gemms::kAuto && (g.rows <= kFusedMaxRows || big_fused))) {
    kernels::FlowGemmArgs fused = g;
    fused.gemv_max_rows = tuning_.gemv_max_rows;
    fused.small_tiles = tuning_.small_tiles;
    ARGEN_CUDA_RETURN(kernels::FlowGemm(fused, stream), what);
    return absl::OkStatus();
  }
  if (g.epilogue == kernels::FlowGemmEpilogue::kBiasSiluBf16) {
    ARGEN_STATUS_RETURN(gemm.Linear(g.x, g.w, g.rows, g.k, g.n, act_, 0.f, what));
    ARGEN_CUDA_RETURN(kernels::FlowBiasSilu(act_, g.bias, g.rows, g.n, g.out_bf16, stream), what);
    return absl::OkStatus();
  }
  ARGEN_STATUS_RETURN(gemm.Linear(g.x, g.w, g.rows, g.k, g.n, g.out_f32, 0.f, what));
  if (g.bias != nullptr) ARGEN_CUDA_RETURN(kernels::AddBias(g.out_f32, g.bias, g.rows, g.n, stream), what);
  return absl::OkStatus();
}

absl::Status DeviceFlowHead::EnqueueNet(Gemm& gemm, cudaStream_t stream, int32_t rows, const float* mod) {
  const Dims& d = dims_;
  const int32_t W = d.width, D = d.token_dim;
  const auto linear = [rows](const bf16* x, const bf16* w, int32_t k, int32_t n, const float* bias, float* out_f32,
                             bf16* out_bf16) {
    return kernels::FlowLinearArgs(rows, x, w, k, n, bias, out_f32, out_bf16);
  };
  ARGEN_STATUS_RETURN(EnqueueLinear(gemm, stream, linear(x_in_, input_proj_w_, D, W, input_proj_b_, h_, nullptr),
                                    /*big_fused=*/true, "flow input_proj"));
  // Block b's modulations: shift at 3bW, scale at 3bW + W, gate at 3bW + 2W; the final layer's after them.
  kernels::FlowResidualNormArgs n;
  n.h = h_;
  n.rows = rows;
  n.width = W;
  n.mod = mod;
  n.mod_bias = ada_b_;
  n.mod_stride = d.mod_width;
  n.shift_at = 0;
  n.scale_at = W;
  n.ln_weight = blocks_[0].ln_weight;
  n.ln_bias = blocks_[0].ln_bias;
  n.hn = hn_;
  ARGEN_CUDA_RETURN(kernels::FlowResidualNorm(n, stream), "flow block 0 norm");
  for (int32_t b = 0; b < d.blocks; ++b) {
    const Block& blk = blocks_[b];
    ARGEN_STATUS_RETURN(EnqueueLinear(gemm, stream, linear(hn_, blk.fc1_w, W, W, blk.fc1_b, nullptr, act_bf16_), false,
                                      "flow block fc1"));
    ARGEN_STATUS_RETURN(EnqueueLinear(gemm, stream, linear(act_bf16_, blk.fc2_w, W, W, nullptr, act_, nullptr), false,
                                      "flow block fc2"));
    const int64_t next = int64_t{b + 1} * 3 * W;  // the next block's (or the final layer's) shift
    n.y = act_;
    n.y_bias = blk.fc2_b;
    n.gate_at = int64_t{b} * 3 * W + 2 * W;
    n.shift_at = next;
    n.scale_at = next + W;
    const bool last = b + 1 == d.blocks;
    n.ln_weight = last ? nullptr : blocks_[b + 1].ln_weight;
    n.ln_bias = last ? nullptr : blocks_[b + 1].ln_bias;
    ARGEN_CUDA_RETURN(kernels::FlowResidualNorm(n, stream), "flow block residual and norm");
  }
  ARGEN_STATUS_RETURN(
      EnqueueLinear(gemm, stream, linear(hn_, final_w_, W, D, final_b_, v_, nullptr), false, "flow final linear"));
  return absl::OkStatus();
}

absl::Status DeviceFlowHead::EnqueueSample(Gemm& gemm, cudaStream_t stream, const float* conditions,
                                           const kernels::PairSampling* sampling, int32_t pairs, float* tokens,
                                           float* kept, const int64_t* kept_offsets, int32_t* nonfinite) {
  const int32_t C = dims_.cond_dim, D = dims_.token_dim, W = dims_.width;
  const int32_t evaluations = static_cast<int32_t>(steps_.size()) + 1;  // the net runs once more for the last step
  for (int32_t p0 = 0; p0 < pairs; p0 += kChunkPairs) {
    const int32_t np = std::min(kChunkPairs, pairs - p0), rows = 2 * np;
    const kernels::PairSampling* s = sampling + p0;
    ARGEN_CUDA_RETURN(kernels::ConvertToBf16(conditions + int64_t{2} * p0 * C, int64_t{rows} * C, cond_bf16_, stream),
                      "flow conditions bf16");
    ARGEN_STATUS_RETURN(EnqueueCondEmbed(gemm, stream, rows));
    ARGEN_CUDA_RETURN(kernels::FlowStartNoise(s, np, D, x_, stream), "flow start noise");
    ARGEN_CUDA_RETURN(kernels::FlowPairRows(x_, np, D, x_in_, stream), "flow pair rows");
    using Modulations = FlowHeadTuning::Modulations;
    if (tuning_.modulations != Modulations::kSide) {
      // As many steps a group as fill kGroupRows rows (in line: one a group): their modulations in one GEMM
      // ([steps x rows] rows, step-major), then their chains.
      const int32_t group =
          tuning_.modulations == Modulations::kInline ? 1 : std::max(1, std::min(evaluations, kGroupRows / rows));
      const int64_t M = dims_.mod_width;
      for (int32_t k0 = 0; k0 < evaluations; k0 += group) {
        const int32_t n = std::min(group, evaluations - k0);
        ARGEN_CUDA_RETURN(
            kernels::FlowSiluCondition(time_table_ + static_cast<int64_t>(k0) * W, n, c_emb_, rows, W, silu_y_, stream),
            "flow silu(y)");
        ARGEN_STATUS_RETURN(
            gemm.Linear(silu_y_, ada_w_, n * rows, W, static_cast<int>(M), mod_[0], 0.f, "flow adaLN modulations"));
        for (int32_t k = k0; k < k0 + n; ++k) {
          ARGEN_STATUS_RETURN(EnqueueNet(gemm, stream, rows, mod_[0] + static_cast<int64_t>(k - k0) * rows * M));
          if (k + 1 < evaluations) {
            ARGEN_CUDA_RETURN(kernels::FlowEulerStep(x_, v_, s, np, D, steps_[k], x_in_, stream), "flow sampler step");
          }
        }
      }
    } else {
      // Fork: the side stream makes step k's modulations into mod_[k % 2] once the chain has read step k - 2's.
      ARGEN_CUDA_RETURN(cudaEventRecord(c_emb_ready_, stream), "flow fork");
      ARGEN_CUDA_RETURN(cudaStreamWaitEvent(side_stream_, c_emb_ready_, 0), "flow fork");
      const auto prepare = [&](int32_t k) -> absl::Status {
        if (k >= 2) ARGEN_CUDA_RETURN(cudaStreamWaitEvent(side_stream_, mod_free_[k % 2], 0), "flow mod free");
        ARGEN_STATUS_RETURN(
            EnqueueModulations(side_gemm_, side_stream_, rows, time_table_ + static_cast<int64_t>(k) * W, mod_[k % 2]));
        ARGEN_CUDA_RETURN(cudaEventRecord(mod_ready_[k % 2], side_stream_), "flow mod ready");
        return absl::OkStatus();
      };
      for (int32_t k = 0; k < std::min(2, evaluations); ++k) ARGEN_STATUS_RETURN(prepare(k));
      for (int32_t k = 0; k < evaluations; ++k) {
        ARGEN_CUDA_RETURN(cudaStreamWaitEvent(stream, mod_ready_[k % 2], 0), "flow mod wait");
        ARGEN_STATUS_RETURN(EnqueueNet(gemm, stream, rows, mod_[k % 2]));
        ARGEN_CUDA_RETURN(cudaEventRecord(mod_free_[k % 2], stream), "flow mod done");
        if (k + 2 < evaluations) ARGEN_STATUS_RETURN(prepare(k + 2));
        if (k + 1 < evaluations) {
          ARGEN_CUDA_RETURN(kernels::FlowEulerStep(x_, v_, s, np, D, steps_[k], x_in_, stream), "flow sampler step");
        }
      }
    }
    // Every side-stream step was waited for above: the fork is joined.
    ARGEN_CUDA_RETURN(kernels::FlowFinish(x_, v_, s, np, D, last_step_size_, normalize_, tokens + int64_t{p0} * D, kept,
                                          kept != nullptr ? kept_offsets + p0 : nullptr, nonfinite, stream),
                      "flow last step");
  }
  return absl::OkStatus();
}

absl::Status DeviceFlowHead::Velocity(Gemm& gemm, cudaStream_t stream, const float* x, float t, const float* c,
                                      int32_t n, float* v) {
  if (n <= 0) return absl::OkStatus();
  if (!time_embedding_) return absl::FailedPreconditionError("device flow head: no time embedding for any t");
  const int32_t C = dims_.cond_dim, D = dims_.token_dim, W = dims_.width;
  std::vector<float> temb(W);
  time_embedding_(t, temb.data());
  absl::StatusOr<DeviceBuffer> xs = DeviceBuffer::Allocate(sizeof(float) * n * D, "velocity x");
  absl::StatusOr<DeviceBuffer> cs = DeviceBuffer::Allocate(sizeof(float) * n * C, "velocity c");
  absl::StatusOr<DeviceBuffer> vs = DeviceBuffer::Allocate(sizeof(float) * n * D, "velocity v");
  if (!xs.ok()) return xs.status();
  if (!cs.ok()) return cs.status();
  if (!vs.ok()) return vs.status();
  ARGEN_CUDA_RETURN(cudaMemcpyAsync(temb_, temb.data(), sizeof(float) * W, cudaMemcpyHostToDevice, stream), "upload");
  ARGEN_CUDA_RETURN(cudaMemcpyAsync(xs->as(), x, xs->bytes(), cudaMemcpyHostToDevice, stream), "upload x");
  ARGEN_CUDA_RETURN(cudaMemcpyAsync(cs->as(), c, cs->bytes(), cudaMemcpyHostToDevice, stream), "upload c");
  for (int32_t r0 = 0; r0 < n; r0 += 2 * kChunkPairs) {
    const int32_t rows = std::min(2 * kChunkPairs, n - r0);
    ARGEN_CUDA_RETURN(kernels::ConvertToBf16(cs->as<float>() + int64_t{r0} * C, int64_t{rows} * C, cond_bf16_, stream),
                      "velocity c bf16");
    ARGEN_STATUS_RETURN(EnqueueCondEmbed(gemm, stream, rows));
    ARGEN_CUDA_RETURN(kernels::ConvertToBf16(xs->as<float>() + int64_t{r0} * D, int64_t{rows} * D, x_in_, stream),
                      "velocity x bf16");
    ARGEN_STATUS_RETURN(EnqueueModulations(gemm, stream, rows, temb_, mod_[0]));
    ARGEN_STATUS_RETURN(EnqueueNet(gemm, stream, rows, mod_[0]));
    ARGEN_CUDA_RETURN(cudaMemcpyAsync(vs->as<float>() + int64_t{r0} * D, v_, sizeof(float) * rows * D,
                                      cudaMemcpyDeviceToDevice, stream),
                      "velocity out");
  }
  ARGEN_CUDA_RETURN(cudaMemcpyAsync(v, vs->as(), vs->bytes(), cudaMemcpyDeviceToHost, stream), "download v");
  ARGEN_CUDA_RETURN(cudaStreamSynchronize(stream), "velocity");
  return absl::OkStatus();
}

}  // namespace argen::cuda
