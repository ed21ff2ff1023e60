#include "engine/families/nextstep/nextstep_spec.h"

#include "absl/strings/str_cat.h"

namespace argen::nextstep {

using model::Linear;
using model::RmsNorm;
using model::Tensor;

model::ModelSpec NextStepStackSpec(const NextStepConfig& config) {
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
  c.qkv_bias = true;
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  const int64_t q_dim = int64_t{c.num_heads} * c.head_dim, kv_dim = int64_t{c.num_kv_heads} * c.head_dim;
  model::ModelSpec spec;
  spec.stack = c;
  spec.text_embed = Tensor("embed_tokens.weight", {config.vocab_size, H});
  spec.layers.resize(c.num_layers);
  for (int32_t i = 0; i < c.num_layers; ++i) {
    const std::string p = absl::StrCat("layers.", i, ".");
    model::LayerRefs& l = spec.layers[i];
    l.input_norm = RmsNorm(p + "input_layernorm.weight", H);
    l.q = Linear(p + "self_attn.q_proj", q_dim, H, /*bias=*/true);
    l.k = Linear(p + "self_attn.k_proj", kv_dim, H, /*bias=*/true);
    l.v = Linear(p + "self_attn.v_proj", kv_dim, H, /*bias=*/true);
    l.o = Linear(p + "self_attn.o_proj", H, q_dim);
    l.post_norm = RmsNorm(p + "post_attention_layernorm.weight", H);
    l.gate = Linear(p + "mlp.gate_proj", I, H);
    l.up = Linear(p + "mlp.up_proj", I, H);
    l.down = Linear(p + "mlp.down_proj", H, I);
  }
  spec.output.final_norm = RmsNorm("norm.weight", H);
  return spec;
}

absl::StatusOr<model::ModelSpec> NextStepSpec(const NextStepConfig& config) {
  model::ModelSpec spec = NextStepStackSpec(config);
  spec.input.vector_in = ImageInProjector(config);
  spec.output.vector_out = ImageOutProjector(config);
  spec.output.token_dim = config.token_dim();
  if (absl::Status s = model::CheckSpec(spec); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("config.json: ", s.message()));
  }
  return spec;
}

model::LinearRef ImageInProjector(const NextStepConfig& config) {
  return Linear(kImageInProjector, config.hidden_size, config.token_dim(), /*bias=*/true);
}

model::LinearRef ImageOutProjector(const NextStepConfig& config) {
  return Linear(kImageOutProjector, config.hidden_size, config.hidden_size, /*bias=*/true);
}

}  // namespace argen::nextstep
