#include "engine/cpu/cpu_weights.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace argen::cpu {
namespace {

using checkpoint::Checkpoint;

absl::Status Load(const Checkpoint& ckpt, const std::string& name, std::vector<int64_t> shape,
                  std::vector<float>* out) {
  absl::StatusOr<std::vector<float>> t = ckpt.LoadF32(name, shape);
  if (!t.ok()) return t.status();
  *out = *std::move(t);
  return absl::OkStatus();
}

// Appends tensor `name` [rows x cols] to `fused` (row-major concatenation along rows).
absl::Status Append(const Checkpoint& ckpt, const std::string& name, int64_t rows, int64_t cols,
                    std::vector<float>* fused) {
  absl::StatusOr<std::vector<float>> t = ckpt.LoadF32(name, {rows, cols});
  if (!t.ok()) return t.status();
  fused->insert(fused->end(), t->begin(), t->end());
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CpuWeights> LoadCpuWeights(std::shared_ptr<const Checkpoint> checkpoint,
                                          const model::ModelDims& d) {
  const Checkpoint& ck = *checkpoint;
  const int64_t hidden = d.hidden_size, q_dim = int64_t{d.num_heads} * d.head_dim,
                kv_dim = int64_t{d.num_kv_heads} * d.head_dim, inter = d.intermediate_size;
  CpuWeights w;
  w.layers.resize(d.num_layers);
  for (int32_t l = 0; l < d.num_layers; ++l) {
    const std::string p = absl::StrCat("language_model.model.layers.", l, ".");
    LayerWeights& lw = w.layers[l];
    lw.qkv.reserve((q_dim + 2 * kv_dim) * hidden);
    lw.gate_up.reserve(2 * inter * hidden);
    for (absl::Status s : {Load(ck, p + "input_layernorm.weight", {hidden}, &lw.input_norm),
                           Append(ck, p + "self_attn.q_proj.weight", q_dim, hidden, &lw.qkv),
                           Append(ck, p + "self_attn.k_proj.weight", kv_dim, hidden, &lw.qkv),
                           Append(ck, p + "self_attn.v_proj.weight", kv_dim, hidden, &lw.qkv),
                           Load(ck, p + "self_attn.o_proj.weight", {hidden, q_dim}, &lw.o),
                           Load(ck, p + "post_attention_layernorm.weight", {hidden}, &lw.post_norm),
                           Append(ck, p + "mlp.gate_proj.weight", inter, hidden, &lw.gate_up),
                           Append(ck, p + "mlp.up_proj.weight", inter, hidden, &lw.gate_up),
                           Load(ck, p + "mlp.down_proj.weight", {hidden, inter}, &lw.down)}) {
      if (!s.ok()) return s;
    }
  }
  const int64_t e = d.image_embed_dim, he = d.head_embed_dim, iv = d.image_vocab;
  for (absl::Status s :
       {Load(ck, "language_model.model.norm.weight", {hidden}, &w.final_norm),
        Load(ck, "gen_embed.weight", {iv, e}, &w.gen_embed),
        Load(ck, "gen_aligner.layers.0.weight", {hidden, e}, &w.aligner_fc1_w),
        Load(ck, "gen_aligner.layers.0.bias", {hidden}, &w.aligner_fc1_b),
        Load(ck, "gen_aligner.layers.2.weight", {hidden, hidden}, &w.aligner_fc2_w),
        Load(ck, "gen_aligner.layers.2.bias", {hidden}, &w.aligner_fc2_b),
        Load(ck, "gen_head.output_mlp_projector.weight", {he, hidden}, &w.head_proj_w),
        Load(ck, "gen_head.output_mlp_projector.bias", {he}, &w.head_proj_b),
        Load(ck, "gen_head.vision_head.weight", {iv, he}, &w.head_out_w),
        Load(ck, "gen_head.vision_head.bias", {iv}, &w.head_out_b)}) {
    if (!s.ok()) return s;
  }

  static constexpr char kEmbed[] = "language_model.model.embed_tokens.weight";
  absl::StatusOr<const checkpoint::TensorInfo*> embed = ck.Find(kEmbed);
  if (!embed.ok()) return embed.status();
  const std::vector<int64_t>& shape = (*embed)->shape;
  if (shape.size() != 2 || shape[0] != d.text_vocab || shape[1] != hidden) {
    return absl::InvalidArgumentError(absl::StrCat((*embed)->file, ": tensor ", kEmbed,
                                                   " must have shape [", d.text_vocab, ", ", hidden,
                                                   "] (language_config.vocab_size, hidden_size)"));
  }
  w.text_embeddings = [checkpoint](const int32_t* ids, int64_t n, float* out) {
    return checkpoint->ReadRowsF32(kEmbed, ids, n, out);
  };
  return w;
}

CpuWeights RandomCpuWeights(const model::ModelDims& d, uint64_t seed, float scale) {
  // Uniform with standard deviation `scale` from a counter hash (SplitMix64):
  // a 1B-parameter model fills in seconds, unlike a normal distribution.
  uint64_t counter = seed * 0x9E3779B97F4A7C15ull;
  const float half_width = scale * 1.7320508f;  // sqrt(3) * sigma
  auto random = [&](int64_t n) {
    std::vector<float> v(n);
    for (float& x : v) {
      uint64_t z = (counter += 0x9E3779B97F4A7C15ull);
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      z ^= z >> 31;
      x = half_width * (static_cast<float>(z >> 40) * (2.0f / 16777216.0f) - 1.0f);
    }
    return v;
  };
  const int64_t hidden = d.hidden_size, q_dim = int64_t{d.num_heads} * d.head_dim,
                kv_dim = int64_t{d.num_kv_heads} * d.head_dim, inter = d.intermediate_size;
  CpuWeights w;
  w.layers.resize(d.num_layers);
  for (LayerWeights& lw : w.layers) {
    lw.input_norm.assign(hidden, 1.0f);
    lw.post_norm.assign(hidden, 1.0f);
    lw.qkv = random((q_dim + 2 * kv_dim) * hidden);
    lw.o = random(hidden * q_dim);
    lw.gate_up = random(2 * inter * hidden);
    lw.down = random(hidden * inter);
  }
  w.final_norm.assign(hidden, 1.0f);
  w.gen_embed = random(int64_t{d.image_vocab} * d.image_embed_dim);
  w.aligner_fc1_w = random(hidden * d.image_embed_dim);
  w.aligner_fc1_b = random(hidden);
  w.aligner_fc2_w = random(hidden * hidden);
  w.aligner_fc2_b = random(hidden);
  w.head_proj_w = random(int64_t{d.head_embed_dim} * hidden);
  w.head_proj_b = random(d.head_embed_dim);
  w.head_out_w = random(int64_t{d.image_vocab} * d.head_embed_dim);
  w.head_out_b = random(d.image_vocab);
  // Deterministic pseudo-embeddings: a hash of (id, column), no table.
  w.text_embeddings = [hidden, scale](const int32_t* ids, int64_t n, float* out) {
    for (int64_t r = 0; r < n; ++r) {
      uint64_t h = 0x9E3779B97F4A7C15ull * (static_cast<uint64_t>(ids[r]) + 1);
      for (int64_t c = 0; c < hidden; ++c) {
        h ^= h >> 33;
        h *= 0xFF51AFD7ED558CCDull;
        h ^= h >> 29;
        out[r * hidden + c] = scale * (static_cast<float>(h >> 40) / 8388608.0f - 1.0f);
      }
    }
    return absl::OkStatus();
  };
  return w;
}

}  // namespace argen::cpu
