#include "engine/families/lumina/lumina_spec.h"

#include <vector>

#include "absl/strings/str_cat.h"

namespace argen::lumina {
namespace {

using model::Linear;
using model::LinearRef;
using model::NormRef;
using model::RmsNorm;
using model::Tensor;
using model::TensorFill;
using model::TensorRef;

// [stored rows, head_dim] weight and bias used as [heads, head_dim].
NormRef HeadNorm(const std::string& prefix, int32_t heads, int32_t stored_rows, int32_t head_dim) {
  const int32_t rows = stored_rows > 0 ? stored_rows : heads;
  NormRef n;
  n.weight = Tensor(prefix + ".weight", {rows, head_dim}, TensorFill::kOne);
  n.bias = Tensor(prefix + ".bias", {rows, head_dim}, TensorFill::kZero);
  n.weight.repeat = n.bias.repeat = heads / rows;
  return n;
}

absl::StatusOr<int32_t> StoredRows(const checkpoint::Checkpoint& ckpt, const std::string& name, int32_t heads,
                                   int32_t head_dim) {
  absl::StatusOr<const checkpoint::TensorInfo*> info = ckpt.Find(name);
  if (!info.ok()) return info.status();
  const std::vector<int64_t>& s = (*info)->shape;
  if (s.size() != 2 || s[1] != head_dim || s[0] <= 0 || heads % s[0] != 0) {
    std::string shape;
    for (int64_t d : s) absl::StrAppend(&shape, shape.empty() ? "" : ", ", d);
    return absl::InvalidArgumentError(absl::StrCat(
        (*info)->file, ": tensor '", name, "' has shape [", shape, "], expected [", heads, ", ", head_dim,
        "] (HF) or [model_parallel_size, ", head_dim, "] with model_parallel_size dividing ", heads, " (Lumina-mGPT)"));
  }
  return static_cast<int32_t>(s[0]);
}

}  // namespace

absl::StatusOr<QkNormRows> ReadQkNormRows(const checkpoint::Checkpoint& ckpt, const LuminaConfig& config) {
  QkNormRows rows;
  absl::StatusOr<int32_t> q =
      StoredRows(ckpt, "model.layers.0.self_attn.q_norm.weight", config.num_attention_heads, config.head_dim);
  if (!q.ok()) return q.status();
  absl::StatusOr<int32_t> k =
      StoredRows(ckpt, "model.layers.0.self_attn.k_norm.weight", config.num_key_value_heads, config.head_dim);
  if (!k.ok()) return k.status();
  rows.q = *q;
  rows.k = *k;
  return rows;
}

absl::StatusOr<model::ModelSpec> LuminaSpec(const LuminaConfig& config, int32_t first_image_id, int32_t image_count,
                                            QkNormRows qk_rows) {
  model::StackConfig c;
  c.num_layers = config.num_hidden_layers;
  c.hidden_size = config.hidden_size;
  c.num_heads = config.num_attention_heads;
  c.num_kv_heads = config.num_key_value_heads;
  c.head_dim = config.head_dim;
  c.intermediate_size = config.intermediate_size;
  c.norm = model::NormKind::kRms;
  c.norm_eps = static_cast<float>(config.rms_norm_eps);
  c.qk_norm = true;
  c.qk_norm_eps = 1e-5f;  // HF ChameleonLayerNorm: fixed, not rms_norm_eps
  c.swin_norm = config.swin_norm;
  c.rope_theta = static_cast<float>(config.rope_theta);
  if (first_image_id < 0 || image_count <= 0 || first_image_id + image_count > config.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat("config.json: image token ids [", first_image_id, ", ",
                                                   first_image_id + image_count, ") must lie inside vocab_size ",
                                                   config.vocab_size));
  }
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  const int64_t q_dim = int64_t{c.num_heads} * c.head_dim, kv_dim = int64_t{c.num_kv_heads} * c.head_dim;
  model::ModelSpec spec;
  spec.stack = c;
  spec.text_embed = Tensor("model.embed_tokens.weight", {config.vocab_size, H});
  spec.layers.resize(c.num_layers);
  for (int32_t i = 0; i < c.num_layers; ++i) {
    const std::string p = absl::StrCat("model.layers.", i, ".");
    model::LayerRefs& l = spec.layers[i];
    l.input_norm = RmsNorm(p + "input_layernorm.weight", H);
    l.q = Linear(p + "self_attn.q_proj", q_dim, H);
    l.k = Linear(p + "self_attn.k_proj", kv_dim, H);
    l.v = Linear(p + "self_attn.v_proj", kv_dim, H);
    l.o = Linear(p + "self_attn.o_proj", H, q_dim);
    l.q_norm = HeadNorm(p + "self_attn.q_norm", c.num_heads, qk_rows.q, c.head_dim);
    l.k_norm = HeadNorm(p + "self_attn.k_norm", c.num_kv_heads, qk_rows.k, c.head_dim);
    l.post_norm = RmsNorm(p + "post_attention_layernorm.weight", H);
    l.gate = Linear(p + "mlp.gate_proj", I, H);
    l.up = Linear(p + "mlp.up_proj", I, H);
    l.down = Linear(p + "mlp.down_proj", H, I);
  }
  spec.output.final_norm = RmsNorm("model.norm.weight", H);
  spec.input.table = spec.text_embed;
  spec.input.sampled_offset = first_image_id;
  spec.output.head.weight =
      Tensor(config.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight", {config.vocab_size, H});
  spec.output.head.weight.row_begin = first_image_id;
  spec.output.head.weight.rows = image_count;
  if (absl::Status s = model::CheckSpec(spec); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("config.json: ", s.message()));
  }
  return spec;
}

}  // namespace argen::lumina
