#include "engine/cuda/device_flow_head.h"

#include <algorithm>
#include <cmath>
#include <span>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/bf16.h"
#include "engine/cuda/cuda_status.h"
#include "kernels/elementwise.h"
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
  const size_t cond_bf16 = carve(R * C * 2), silu_y = carve(R * W * 2), x_in = carve(R * D * 2), hn = carve(R * W * 2),
               act_bf16 = carve(R * W * 2), c_emb = carve(R * W * 4), x = carve(int64_t{kChunkPairs} * D * 4),
               hs = carve(R * W * 4), act = carve(R * W * 4), mod = carve(R * M * 4), v = carve(R * D * 4),
               temb = carve(int64_t{W} * 4);
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
  h->mod_ = reinterpret_cast<float*>(base + mod);
  h->v_ = reinterpret_cast<float*>(base + v);
  h->temb_ = reinterpret_cast<float*>(base + temb);
  return h;
}

absl::Status DeviceFlowHead::EnqueueCondEmbed(Gemm& gemm, cudaStream_t stream, int32_t rows) {
  const Dims& d = dims_;
  ARGEN_STATUS_RETURN(
      gemm.Linear(cond_bf16_, cond_embed_w_, rows, d.cond_dim, d.width, c_emb_, 0.f, "flow cond_embed"));
  ARGEN_CUDA_RETURN(kernels::AddBias(c_emb_, cond_embed_b_, rows, d.width, stream), "flow cond_embed bias");
  return absl::OkStatus();
}

absl::Status DeviceFlowHead::EnqueueNet(Gemm& gemm, cudaStream_t stream, int32_t rows, const float* temb) {
  const Dims& d = dims_;
  const int32_t W = d.width, D = d.token_dim;
  const int64_t M = d.mod_width;
  ARGEN_CUDA_RETURN(kernels::FlowSiluCondition(temb, c_emb_, rows, W, silu_y_, stream), "flow silu(y)");
  ARGEN_STATUS_RETURN(gemm.Linear(x_in_, input_proj_w_, rows, D, W, h_, 0.f, "flow input_proj"));
  ARGEN_CUDA_RETURN(kernels::AddBias(h_, input_proj_b_, rows, W, stream), "flow input_proj bias");
  ARGEN_STATUS_RETURN(gemm.Linear(silu_y_, ada_w_, rows, W, static_cast<int>(M), mod_, 0.f, "flow adaLN modulations"));
  ARGEN_CUDA_RETURN(kernels::AddBias(mod_, ada_b_, rows, static_cast<int>(M), stream), "flow adaLN bias");
  for (int32_t b = 0; b < d.blocks; ++b) {
    const Block& blk = blocks_[b];
    const float* mod = mod_ + int64_t{b} * 3 * W;  // shift, scale, gate of block b
    ARGEN_CUDA_RETURN(kernels::FlowAdaLayerNorm(h_, rows, W, blk.ln_weight, blk.ln_bias, mod, M, hn_, stream),
                      "flow block norm");
    ARGEN_STATUS_RETURN(gemm.Linear(hn_, blk.fc1_w, rows, W, W, act_, 0.f, "flow block fc1"));
    ARGEN_CUDA_RETURN(kernels::FlowBiasSilu(act_, blk.fc1_b, rows, W, act_bf16_, stream), "flow block silu");
    ARGEN_STATUS_RETURN(gemm.Linear(act_bf16_, blk.fc2_w, rows, W, W, act_, 0.f, "flow block fc2"));
    ARGEN_CUDA_RETURN(kernels::FlowGatedResidual(h_, act_, blk.fc2_b, mod + 2 * W, M, rows, W, stream),
                      "flow block residual");
  }
  ARGEN_CUDA_RETURN(
      kernels::FlowAdaLayerNorm(h_, rows, W, nullptr, nullptr, mod_ + int64_t{d.blocks} * 3 * W, M, hn_, stream),
      "flow final norm");
  ARGEN_STATUS_RETURN(gemm.Linear(hn_, final_w_, rows, W, D, v_, 0.f, "flow final linear"));
  ARGEN_CUDA_RETURN(kernels::AddBias(v_, final_b_, rows, D, stream), "flow final bias");
  return absl::OkStatus();
}

absl::Status DeviceFlowHead::EnqueueSample(Gemm& gemm, cudaStream_t stream, const float* conditions,
                                           const kernels::PairSampling* sampling, int32_t pairs, float* tokens,
                                           float* kept, const int64_t* kept_offsets, int32_t* nonfinite) {
  const int32_t C = dims_.cond_dim, D = dims_.token_dim, W = dims_.width;
  for (int32_t p0 = 0; p0 < pairs; p0 += kChunkPairs) {
    const int32_t np = std::min(kChunkPairs, pairs - p0), rows = 2 * np;
    const kernels::PairSampling* s = sampling + p0;
    ARGEN_CUDA_RETURN(kernels::ConvertToBf16(conditions + int64_t{2} * p0 * C, int64_t{rows} * C, cond_bf16_, stream),
                      "flow conditions bf16");
    ARGEN_STATUS_RETURN(EnqueueCondEmbed(gemm, stream, rows));
    ARGEN_CUDA_RETURN(kernels::FlowStartNoise(s, np, D, x_, stream), "flow start noise");
    for (size_t k = 0; k < steps_.size(); ++k) {
      ARGEN_CUDA_RETURN(kernels::FlowPairRows(x_, np, D, x_in_, stream), "flow pair rows");
      ARGEN_STATUS_RETURN(EnqueueNet(gemm, stream, rows, time_table_ + static_cast<int64_t>(k) * W));
      ARGEN_CUDA_RETURN(kernels::FlowEulerStep(x_, v_, s, np, D, steps_[k], stream), "flow sampler step");
    }
    ARGEN_CUDA_RETURN(kernels::FlowPairRows(x_, np, D, x_in_, stream), "flow pair rows");
    ARGEN_STATUS_RETURN(EnqueueNet(gemm, stream, rows, time_table_ + static_cast<int64_t>(steps_.size()) * W));
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
    ARGEN_STATUS_RETURN(EnqueueNet(gemm, stream, rows, temb_));
    ARGEN_CUDA_RETURN(cudaMemcpyAsync(vs->as<float>() + int64_t{r0} * D, v_, sizeof(float) * rows * D,
                                      cudaMemcpyDeviceToDevice, stream),
                      "velocity out");
  }
  ARGEN_CUDA_RETURN(cudaMemcpyAsync(v, vs->as(), vs->bytes(), cudaMemcpyDeviceToHost, stream), "download v");
  ARGEN_CUDA_RETURN(cudaStreamSynchronize(stream), "velocity");
  return absl::OkStatus();
}

}  // namespace argen::cuda
