#include "engine/families/emu3/emu3_spec.h"

#include "absl/strings/str_cat.h"

namespace argen::emu3 {

using model::Linear;
using model::RmsNorm;
using model::Tensor;

absl::StatusOr<Emu3TensorNames> FindEmu3TensorNames(const checkpoint::Checkpoint& checkpoint, Emu3Layout layout) {
  if (layout == Emu3Layout::kBaai) {
    if (!checkpoint.Has("model.embed_tokens.weight")) {
      return absl::NotFoundError(
          absl::StrCat(checkpoint.dir(), ": no tensor 'model.embed_tokens.weight' (BAAI Emu3-Gen names)"));
    }
    return Emu3TensorNames{"model.", "lm_head.weight", ""};
  }
  if (checkpoint.Has("text_model.model.embed_tokens.weight")) {
    return Emu3TensorNames{"text_model.model.", "text_model.lm_head.weight", "vqmodel."};
  }
  if (checkpoint.Has("model.text_model.embed_tokens.weight")) {
    return Emu3TensorNames{"model.text_model.", "lm_head.weight", "model.vqmodel."};
  }
  return absl::NotFoundError(absl::StrCat(checkpoint.dir(),
                                          ": no tensor 'text_model.model.embed_tokens.weight' or "
                                          "'model.text_model.embed_tokens.weight' (transformers' Emu3 names)"));
}

absl::StatusOr<model::ModelSpec> Emu3Spec(const Emu3Config& config, const Emu3TensorNames& names, int32_t first_visual,
                                          int32_t codes) {
  model::StackConfig c;
  c.num_layers = config.num_hidden_layers;
  c.hidden_size = config.hidden_size;
  c.num_heads = config.num_attention_heads;
  c.num_kv_heads = config.num_key_value_heads;
  c.head_dim = config.head_dim;
  c.intermediate_size = config.intermediate_size;
  c.norm = model::NormKind::kRms;
  c.norm_eps = static_cast<float>(config.rms_norm_eps);
  c.rope_theta = static_cast<float>(config.rope_theta);
  if (first_visual < 0 || codes <= 0 || first_visual + codes > config.vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat("config.json: visual token ids [", first_visual, ", ",
                                                   first_visual + codes, ") must lie inside vocab_size ",
                                                   config.vocab_size));
  }
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  const int64_t q_dim = int64_t{c.num_heads} * c.head_dim, kv_dim = int64_t{c.num_kv_heads} * c.head_dim;
  model::ModelSpec spec;
  spec.stack = c;
  spec.text_embed = Tensor(names.decoder + "embed_tokens.weight", {config.vocab_size, H});
  spec.layers.resize(c.num_layers);
  for (int32_t i = 0; i < c.num_layers; ++i) {
    const std::string p = absl::StrCat(names.decoder, "layers.", i, ".");
    model::LayerRefs& l = spec.layers[i];
    l.input_norm = RmsNorm(p + "input_layernorm.weight", H);
    l.q = Linear(p + "self_attn.q_proj", q_dim, H);
    l.k = Linear(p + "self_attn.k_proj", kv_dim, H);
    l.v = Linear(p + "self_attn.v_proj", kv_dim, H);
    l.o = Linear(p + "self_attn.o_proj", H, q_dim);
    l.post_norm = RmsNorm(p + "post_attention_layernorm.weight", H);
    l.gate = Linear(p + "mlp.gate_proj", I, H);
    l.up = Linear(p + "mlp.up_proj", I, H);
    l.down = Linear(p + "mlp.down_proj", H, I);
  }
  spec.output.final_norm = RmsNorm(names.decoder + "norm.weight", H);
  spec.input.table = spec.text_embed;
  spec.input.sampled_offset = first_visual;
  spec.output.head.weight = Tensor(names.lm_head, {config.vocab_size, H});
  spec.output.head.weight.row_begin = first_visual;
  spec.output.head.weight.rows = codes;
  if (absl::Status s = model::CheckSpec(spec); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("config.json: ", s.message()));
  }
  return spec;
}

}  // namespace argen::emu3
