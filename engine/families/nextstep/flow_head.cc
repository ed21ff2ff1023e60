#include "engine/families/nextstep/flow_head.h"

#include <cblas.h>

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/sampling_rng.h"

namespace argen::nextstep {
namespace {

constexpr float kLayerNormEps = 1e-6f;

inline float Silu(float x) { return x / (1.0f + std::exp(-x)); }

// Row-wise LayerNorm over `width` (biased variance), optional affine.
void LayerNormRows(const float* x, int32_t n, int32_t width, const float* weight, const float* bias, float* out) {
  for (int32_t r = 0; r < n; ++r) {
    const float* in = x + int64_t{r} * width;
    float* o = out + int64_t{r} * width;
    double sum = 0;
    for (int32_t i = 0; i < width; ++i) sum += in[i];
    const double mean = sum / width;
    double sq = 0;
    for (int32_t i = 0; i < width; ++i) sq += (in[i] - mean) * (in[i] - mean);
    const float inv = static_cast<float>(1.0 / std::sqrt(sq / width + kLayerNormEps));
    const float m = static_cast<float>(mean);
    for (int32_t i = 0; i < width; ++i) {
      const float y = (in[i] - m) * inv;
      o[i] = weight == nullptr ? y : y * weight[i] + bias[i];
    }
  }
}

// torch.linspace(0, end, steps) in float32 (its CPU kernel: from the start in
// the first half, from the end in the second), then the shift.
std::vector<float> TimeGrid(int32_t steps, float end, float shift) {
  std::vector<float> t(steps);
  const float step = end / static_cast<float>(steps - 1);
  const int32_t halfway = steps / 2;
  for (int32_t i = 0; i < steps; ++i) {
    t[i] = i < halfway ? step * static_cast<float>(i) : end - step * static_cast<float>(steps - i - 1);
    t[i] = t[i] / (shift - (shift - 1.0f) * t[i]);
  }
  return t;
}

}  // namespace

std::vector<model::TensorRef> FlowHeadTensors(const std::string& prefix, const FlowHeadDims& d) {
  std::vector<model::TensorRef> out;
  auto linear = [&](const std::string& name, int64_t o, int64_t i) {
    const model::LinearRef l = model::Linear(prefix + name, o, i, /*bias=*/true);
    out.push_back(l.weight);
    out.push_back(l.bias);
  };
  const int64_t W = d.width;
  linear("time_embed.mlp.0", W, d.frequencies);
  linear("time_embed.mlp.2", W, W);
  linear("cond_embed", W, d.cond_dim);
  linear("input_proj", W, d.token_dim);
  for (int32_t b = 0; b < d.blocks; ++b) {
    const std::string p = absl::StrCat("res_blocks.", b, ".");
    out.push_back(model::Tensor(prefix + p + "in_ln.weight", {W}, model::TensorFill::kOne));
    out.push_back(model::Tensor(prefix + p + "in_ln.bias", {W}, model::TensorFill::kBias));
    linear(p + "mlp.0", W, W);  // mlp_ratio 1.0
    linear(p + "mlp.2", W, W);
    linear(p + "adaLN_modulation.1", 3 * W, W);
  }
  linear("final_layer.adaLN_modulation.1", 2 * W, W);
  linear("final_layer.linear", d.token_dim, W);
  return out;
}

NoiseFn KeyedNoise(uint64_t seed, std::vector<uint32_t> images, uint32_t token, int32_t token_dim) {
  return [seed, images = std::move(images), token, token_dim](int32_t pair, int32_t draw, float* out) {
    float four[4];
    for (int32_t e = 0; e < token_dim; e += 4) {
      kernels::SampleNormal4(seed, images[pair], token, static_cast<uint32_t>(draw), static_cast<uint32_t>(e / 4),
                             four);
      for (int32_t j = 0; j < 4 && e + j < token_dim; ++j) out[e + j] = four[j];
    }
  };
}

absl::StatusOr<std::unique_ptr<FlowHead>> FlowHead::Load(const TensorSource& source, const std::string& prefix,
                                                         const FlowHeadDims& dims) {
  for (auto [v, field] : {std::pair{dims.token_dim, "token_dim"}, std::pair{dims.cond_dim, "cond_dim"},
                          std::pair{dims.width, "width"}, std::pair{dims.blocks, "blocks"}}) {
    if (v <= 0) return absl::InvalidArgumentError(absl::StrCat("flow head: ", field, " must be positive"));
  }
  if (dims.frequencies <= 0 || dims.frequencies % 2 != 0) {
    return absl::InvalidArgumentError("flow head: frequencies must be positive and even");
  }
  std::unique_ptr<FlowHead> head(new FlowHead(dims));
  auto load = [&](const std::string& name, int32_t out, int32_t in, Linear* l) -> absl::Status {
    absl::StatusOr<std::vector<float>> w = source(prefix + name + ".weight", {out, in});
    if (!w.ok()) return w.status();
    absl::StatusOr<std::vector<float>> b = source(prefix + name + ".bias", {out});
    if (!b.ok()) return b.status();
    *l = Linear{*std::move(w), *std::move(b), out, in};
    return absl::OkStatus();
  };
  const int32_t W = dims.width;
  for (absl::Status s :
       {load("time_embed.mlp.0", W, dims.frequencies, &head->time_fc1), load("time_embed.mlp.2", W, W, &head->time_fc2),
        load("cond_embed", W, dims.cond_dim, &head->cond_embed),
        load("input_proj", W, dims.token_dim, &head->input_proj),
        load("final_layer.adaLN_modulation.1", 2 * W, W, &head->final_ada),
        load("final_layer.linear", dims.token_dim, W, &head->final_linear)}) {
    if (!s.ok()) return s;
  }
  head->blocks_.resize(dims.blocks);
  for (int32_t b = 0; b < dims.blocks; ++b) {
    const std::string p = absl::StrCat("res_blocks.", b, ".");
    Block& blk = head->blocks_[b];
    absl::StatusOr<std::vector<float>> lw = source(prefix + p + "in_ln.weight", {W});
    if (!lw.ok()) return lw.status();
    absl::StatusOr<std::vector<float>> lb = source(prefix + p + "in_ln.bias", {W});
    if (!lb.ok()) return lb.status();
    blk.ln_weight = *std::move(lw);
    blk.ln_bias = *std::move(lb);
    for (absl::Status s : {load(p + "mlp.0", W, W, &blk.fc1), load(p + "mlp.2", W, W, &blk.fc2),
                           load(p + "adaLN_modulation.1", 3 * W, W, &blk.ada)}) {
      if (!s.ok()) return s;
    }
  }
  return head;
}

void FlowHead::Apply(const Linear& l, const float* x, int32_t n, float* out) {
  for (int32_t r = 0; r < n; ++r) std::copy(l.bias.begin(), l.bias.end(), out + int64_t{r} * l.out);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, l.out, l.in, 1.0f, x, l.in, l.weight.data(), l.in, 1.0f, out,
              l.out);
}

void FlowHead::CondEmbed(const float* c, int32_t n, float* out) const { Apply(cond_embed, c, n, out); }

void FlowHead::Velocity(const float* x, float t, const float* c, int32_t n, float* v) const {
  std::vector<float> c_emb(static_cast<size_t>(n) * dims_.width);
  CondEmbed(c, n, c_emb.data());
  VelocityEmbedded(x, t, c_emb.data(), n, v);
}

void FlowHead::TimeEmbedding(float t, float* out) const {
  const int32_t W = dims_.width, F = dims_.frequencies, half = F / 2;
  std::vector<float> freq(F), t1(W);
  const float neg_log_period = -std::log(10000.0f);
  for (int32_t i = 0; i < half; ++i) {
    const float arg = t * std::exp(neg_log_period * static_cast<float>(i) / static_cast<float>(half));
    freq[i] = std::cos(arg);
    freq[half + i] = std::sin(arg);
  }
  Apply(time_fc1, freq.data(), 1, t1.data());
  for (float& e : t1) e = Silu(e);
  Apply(time_fc2, t1.data(), 1, out);
}

model::FlowMatchingHeadDesc FlowHead::Describe(const FlowSampling& s) const {
  model::FlowMatchingHeadDesc d;
  const auto view = [](const Linear& l) { return model::FlowMatchingHeadDesc::Linear{l.weight, l.bias, l.out, l.in}; };
  d.token_dim = dims_.token_dim;
  d.cond_dim = dims_.cond_dim;
  d.width = dims_.width;
  d.cond_embed = view(cond_embed);
  d.input_proj = view(input_proj);
  for (const Block& b : blocks_) d.blocks.push_back({b.ln_weight, b.ln_bias, view(b.fc1), view(b.fc2), view(b.ada)});
  d.final_ada = view(final_ada);
  d.final_linear = view(final_linear);
  if (s.steps >= 2) d.times = TimeGrid(s.steps, 1.0f - s.last_step_size, s.timesteps_shift);
  d.time_embeddings.resize(d.times.size() * dims_.width);
  for (size_t k = 0; k < d.times.size(); ++k) TimeEmbedding(d.times[k], d.time_embeddings.data() + k * dims_.width);
  d.last_step_size = s.last_step_size;
  d.normalize = s.normalize;
  d.time_embedding = [this](float t, float* out) { TimeEmbedding(t, out); };
  return d;
}

void FlowHead::VelocityEmbedded(const float* x, float t, const float* c_emb, int32_t n, float* v) const {
  const int32_t W = dims_.width;
  const size_t rows = static_cast<size_t>(n);
  // TimestepEmbedder: the same t for every row.
  std::vector<float> temb(W);
  TimeEmbedding(t, temb.data());
  // silu(y), y = temb + cond_embed(c): what every adaLN_modulation reads.
  std::vector<float> sy(rows * W);
  for (size_t r = 0; r < rows; ++r) {
    for (int32_t i = 0; i < W; ++i) sy[r * W + i] = Silu(temb[i] + c_emb[r * W + i]);
  }
  std::vector<float> h(rows * W), hn(rows * W), a(rows * W), b(rows * W), mod(rows * 3 * W);
  Apply(input_proj, x, n, h.data());
  for (const Block& blk : blocks_) {
    Apply(blk.ada, sy.data(), n, mod.data());
    LayerNormRows(h.data(), n, W, blk.ln_weight.data(), blk.ln_bias.data(), hn.data());
    for (size_t r = 0; r < rows; ++r) {
      const float* shift = mod.data() + r * 3 * W;
      const float* scale = shift + W;
      float* row = hn.data() + r * W;
      for (int32_t i = 0; i < W; ++i) row[i] = row[i] * (1.0f + scale[i]) + shift[i];
    }
    Apply(blk.fc1, hn.data(), n, a.data());
    for (float& e : a) e = Silu(e);
    Apply(blk.fc2, a.data(), n, b.data());
    for (size_t r = 0; r < rows; ++r) {
      const float* gate = mod.data() + r * 3 * W + 2 * W;
      for (int32_t i = 0; i < W; ++i) h[r * W + i] += gate[i] * b[r * W + i];
    }
  }
  Apply(final_ada, sy.data(), n, mod.data());  // [n, 2W]: shift, scale
  LayerNormRows(h.data(), n, W, nullptr, nullptr, hn.data());
  for (size_t r = 0; r < rows; ++r) {
    const float* shift = mod.data() + r * 2 * W;
    const float* scale = shift + W;
    float* row = hn.data() + r * W;
    for (int32_t i = 0; i < W; ++i) row[i] = row[i] * (1.0f + scale[i]) + shift[i];
  }
  Apply(final_linear, hn.data(), n, v);
}

absl::Status FlowHead::Sample(const float* cond, const float* uncond, int32_t pairs, const FlowSampling& s,
                              const NoiseFn& noise, float* tokens) const {
  if (s.steps < 2) return absl::InvalidArgumentError(absl::StrCat("flow sampling: steps must be >= 2, got ", s.steps));
  if (!std::isfinite(s.cfg) || !std::isfinite(s.timesteps_shift) || !(s.timesteps_shift > 0)) {
    return absl::InvalidArgumentError("flow sampling: cfg and timesteps_shift must be finite (the shift positive)");
  }
  if (!(s.last_step_size > 0 && s.last_step_size < 1)) {
    return absl::InvalidArgumentError("flow sampling: last_step_size must lie in (0, 1)");
  }
  if (pairs <= 0) return absl::OkStatus();
  const bool guided = s.cfg > 1.0f;
  if (guided && uncond == nullptr) {
    return absl::InvalidArgumentError("flow sampling: guidance (cfg > 1) needs the unconditional rows");
  }
  const int32_t D = dims_.token_dim, W = dims_.width;
  const int32_t rows = guided ? 2 * pairs : pairs;  // cond rows, then uncond rows
  const size_t pd = static_cast<size_t>(pairs) * D;
  std::vector<float> c_emb(static_cast<size_t>(rows) * W);
  CondEmbed(cond, pairs, c_emb.data());
  if (guided) CondEmbed(uncond, pairs, c_emb.data() + static_cast<size_t>(pairs) * W);

  std::vector<float> x(pd), xin(static_cast<size_t>(rows) * D), v_rows(static_cast<size_t>(rows) * D), v(pd), w(D);
  for (int32_t p = 0; p < pairs; ++p) noise(p, 0, x.data() + static_cast<size_t>(p) * D);
  // The guided velocity at x, time t, into v.
  auto velocity = [&](float t) {
    std::copy(x.begin(), x.end(), xin.begin());
    if (guided) std::copy(x.begin(), x.end(), xin.begin() + pd);
    VelocityEmbedded(xin.data(), t, c_emb.data(), rows, v_rows.data());
    for (size_t i = 0; i < pd; ++i) v[i] = guided ? v_rows[pd + i] + s.cfg * (v_rows[i] - v_rows[pd + i]) : v_rows[i];
  };
  const std::vector<float> t = TimeGrid(s.steps, 1.0f - s.last_step_size, s.timesteps_shift);
  for (int32_t k = 0; k + 1 < s.steps; ++k) {
    const float ti = t[k], dt = t[k + 1] - t[k];
    velocity(ti);
    const float sigma = 1.0f - ti;
    const float var = sigma * sigma + ti * sigma;  // sigma^2 - (alpha / d_alpha) d_sigma sigma, d_sigma = -1
    const float sqrt_dt = std::sqrt(dt), diffusion = std::sqrt(2.0f * sigma);
    for (int32_t p = 0; p < pairs; ++p) {
      noise(p, k + 1, w.data());
      float* xp = x.data() + static_cast<size_t>(p) * D;
      const float* vp = v.data() + static_cast<size_t>(p) * D;
      for (int32_t i = 0; i < D; ++i) {
        const float score = (ti * vp[i] - xp[i]) / var;
        const float drift = vp[i] + sigma * score;
        xp[i] = (xp[i] + drift * dt) + diffusion * (w[i] * sqrt_dt);
      }
    }
  }
  velocity(t[s.steps - 1]);
  for (size_t i = 0; i < pd; ++i) x[i] += v[i] * s.last_step_size;
  if (s.normalize) {
    LayerNormRows(x.data(), pairs, D, nullptr, nullptr, tokens);
  } else {
    std::copy(x.begin(), x.end(), tokens);
  }
  return absl::OkStatus();
}

}  // namespace argen::nextstep
