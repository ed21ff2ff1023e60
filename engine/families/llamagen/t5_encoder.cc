#include "engine/families/llamagen/t5_encoder.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/families/llamagen/host_math.h"

namespace argen::llamagen {
namespace {

// T5LayerNorm: x * rsqrt(mean(x^2) + eps) * weight (no mean, no bias).
void T5Norm(const float* x, int64_t rows, int32_t dim, const std::vector<float>& weight, float eps, float* y) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * dim;
    float* yr = y + r * dim;
    float sum = 0.0f;
    for (int32_t i = 0; i < dim; ++i) sum += xr[i] * xr[i];
    const float scale = 1.0f / std::sqrt(sum / static_cast<float>(dim) + eps);
    for (int32_t i = 0; i < dim; ++i) yr[i] = weight[i] * (xr[i] * scale);
  }
}

}  // namespace

int32_t T5RelativeBucket(int32_t relative_position, int32_t num_buckets, int32_t max_distance) {
  const int32_t half = num_buckets / 2;
  int32_t bucket = relative_position > 0 ? half : 0;
  const int32_t n = relative_position < 0 ? -relative_position : relative_position;
  const int32_t max_exact = half / 2;
  if (n < max_exact) return bucket + n;
  // float32 throughout, as torch evaluates it (the boundaries 16, 32, 64 land exactly).
  const float scaled = std::log(static_cast<float>(n) / static_cast<float>(max_exact)) /
                       static_cast<float>(std::log(static_cast<double>(max_distance) / max_exact)) *
                       static_cast<float>(half - max_exact);
  const int32_t large = max_exact + static_cast<int32_t>(scaled);
  return bucket + std::min(large, half - 1);
}

absl::StatusOr<std::string> T5EmbeddingName(const checkpoint::Checkpoint& c, const T5EncoderConfig& config) {
  const std::string name = c.Has("shared.weight") ? "shared.weight" : "encoder.embed_tokens.weight";
  absl::StatusOr<const checkpoint::TensorInfo*> table = c.Find(name);
  if (!table.ok()) {
    return absl::NotFoundError(
        absl::StrCat(c.dir(), ": the T5 token embeddings (shared.weight or encoder.embed_tokens.weight) are missing"));
  }
  if ((*table)->shape != std::vector<int64_t>{config.vocab_size, config.d_model}) {
    return absl::InvalidArgumentError(absl::StrCat(c.dir(), ": ", name, " is not [vocab_size ", config.vocab_size,
                                                   ", d_model ", config.d_model, "]"));
  }
  return name;
}

absl::StatusOr<std::unique_ptr<T5Encoder>> T5Encoder::Open(const std::string& t5_dir) {
  absl::StatusOr<T5EncoderConfig> config = LoadT5EncoderConfig(t5_dir);
  if (!config.ok()) return config.status();
  absl::StatusOr<std::unique_ptr<checkpoint::Checkpoint>> ckpt = checkpoint::Checkpoint::Open(t5_dir);
  if (!ckpt.ok()) return ckpt.status();
  return Create(*config, std::shared_ptr<const checkpoint::Checkpoint>(std::move(*ckpt)));
}

absl::StatusOr<std::unique_ptr<T5Encoder>> T5Encoder::Create(const T5EncoderConfig& config,
                                                             std::shared_ptr<const checkpoint::Checkpoint> ckpt) {
  std::unique_ptr<T5Encoder> e(new T5Encoder(config, std::move(ckpt)));
  const checkpoint::Checkpoint& c = *e->ckpt_;
  const int64_t d = config.d_model, inner = config.inner_dim(), ff = config.d_ff;
  absl::StatusOr<std::string> embed = T5EmbeddingName(c, config);
  if (!embed.ok()) return embed.status();
  e->embed_name_ = *std::move(embed);
  auto load = [&c](const std::string& name, std::vector<int64_t> shape, std::vector<float>& out) -> absl::Status {
    absl::StatusOr<std::vector<float>> v = c.LoadF32(name, shape);
    if (!v.ok()) return v.status();
    out = *std::move(v);
    return absl::OkStatus();
  };
  const std::string bias_name = "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight";
  if (absl::Status s = load(bias_name, {config.relative_attention_num_buckets, config.num_heads}, e->relative_bias_);
      !s.ok()) {
    return s;
  }
  e->blocks_.resize(config.num_layers);
  for (int32_t i = 0; i < config.num_layers; ++i) {
    const std::string attn = absl::StrCat("encoder.block.", i, ".layer.0.");
    const std::string ffn = absl::StrCat("encoder.block.", i, ".layer.1.");
    Block& b = e->blocks_[i];
    for (const auto& [name, shape, out] :
         std::vector<std::tuple<std::string, std::vector<int64_t>, std::vector<float>*>>{
             {attn + "layer_norm.weight", {d}, &b.ln0},
             {attn + "SelfAttention.q.weight", {inner, d}, &b.q},
             {attn + "SelfAttention.k.weight", {inner, d}, &b.k},
             {attn + "SelfAttention.v.weight", {inner, d}, &b.v},
             {attn + "SelfAttention.o.weight", {d, inner}, &b.o},
             {ffn + "layer_norm.weight", {d}, &b.ln1},
             {ffn + "DenseReluDense.wi_0.weight", {ff, d}, &b.wi0},
             {ffn + "DenseReluDense.wi_1.weight", {ff, d}, &b.wi1},
             {ffn + "DenseReluDense.wo.weight", {d, ff}, &b.wo}}) {
      if (absl::Status s = load(name, shape, *out); !s.ok()) return s;
    }
  }
  if (absl::Status s = load("encoder.final_layer_norm.weight", {d}, e->final_norm_); !s.ok()) return s;
  return e;
}

absl::StatusOr<std::vector<float>> T5Encoder::Encode(const std::vector<int32_t>& ids) const {
  const T5EncoderConfig& c = config_;
  const int64_t n = static_cast<int64_t>(ids.size());
  const int32_t d = c.d_model, inner = c.inner_dim(), heads = c.num_heads, dk = c.d_kv, ff = c.d_ff;
  for (const int32_t id : ids) {
    if (id < 0 || id >= c.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat("T5 token id ", id, " is outside [0, ", c.vocab_size, ")"));
    }
  }
  std::vector<float> x(n * d);
  if (n == 0) return x;
  if (absl::Status s = ckpt_->ReadRowsF32(embed_name_, ids.data(), n, x.data()); !s.ok()) return s;

  // bias[h][i][j]: block 0's relative_attention_bias at bucket(j - i), for every block.
  std::vector<float> bias(static_cast<size_t>(heads) * n * n);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const int32_t bucket = T5RelativeBucket(static_cast<int32_t>(j - i), c.relative_attention_num_buckets,
                                              c.relative_attention_max_distance);
      for (int32_t h = 0; h < heads; ++h) bias[(h * n + i) * n + j] = relative_bias_[bucket * heads + h];
    }
  }

  std::vector<float> normed(n * d), q(n * inner), k(n * inner), v(n * inner), ctx(n * inner), out(n * d);
  std::vector<float> scores(n * n), gate(n * ff), up(n * ff);
  for (const Block& b : blocks_) {
    T5Norm(x.data(), n, d, b.ln0, c.layer_norm_epsilon, normed.data());
    HostLinear(normed.data(), n, b.q, d, inner, q.data());
    HostLinear(normed.data(), n, b.k, d, inner, k.data());
    HostLinear(normed.data(), n, b.v, d, inner, v.data());
    for (int32_t h = 0; h < heads; ++h) {
      // scores = q_h k_h^T + bias_h (T5 folds the 1/sqrt(d_kv) into its initialisation: no scaling here).
      std::copy(bias.begin() + h * n * n, bias.begin() + (h + 1) * n * n, scores.begin());
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n), static_cast<int>(n), dk, 1.0f,
                  q.data() + h * dk, inner, k.data() + h * dk, inner, 1.0f, scores.data(), static_cast<int>(n));
      for (int64_t i = 0; i < n; ++i) {
        float* row = scores.data() + i * n;
        const float top = *std::max_element(row, row + n);
        float sum = 0.0f;
        for (int64_t j = 0; j < n; ++j) sum += (row[j] = std::exp(row[j] - top));
        for (int64_t j = 0; j < n; ++j) row[j] /= sum;
      }
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(n), dk, static_cast<int>(n), 1.0f,
                  scores.data(), static_cast<int>(n), v.data() + h * dk, inner, 0.0f, ctx.data() + h * dk, inner);
    }
    HostLinear(ctx.data(), n, b.o, inner, d, out.data());
    for (int64_t i = 0; i < n * d; ++i) x[i] += out[i];

    T5Norm(x.data(), n, d, b.ln1, c.layer_norm_epsilon, normed.data());
    HostLinear(normed.data(), n, b.wi0, d, ff, gate.data());
    HostLinear(normed.data(), n, b.wi1, d, ff, up.data());
    for (int64_t i = 0; i < n * ff; ++i) gate[i] = GeluTanh(gate[i]) * up[i];
    HostLinear(gate.data(), n, b.wo, ff, d, out.data());
    for (int64_t i = 0; i < n * d; ++i) x[i] += out[i];
  }
  std::vector<float> hidden(n * d);
  T5Norm(x.data(), n, d, final_norm_, c.layer_norm_epsilon, hidden.data());
  return hidden;
}

}  // namespace argen::llamagen
