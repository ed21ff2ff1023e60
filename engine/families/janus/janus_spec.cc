#include "engine/families/janus/janus_spec.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "engine/vq/vq_tensors.h"

namespace argen::janus {
namespace {

using model::Linear;
using model::LinearRef;
using model::NormRef;
using model::RmsNorm;
using model::Tensor;
using model::TensorFill;
using model::TensorRef;

absl::Status Positive(int32_t v, const char* field) {
  if (v > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("config.json: ", field, " must be positive, got ", v));
}

}  // namespace

absl::StatusOr<model::ModelSpec> JanusSpec(const JanusConfig& config) {
  const LanguageConfig& lang = config.language;
  model::StackConfig c;
  c.num_layers = lang.num_hidden_layers;
  c.hidden_size = lang.hidden_size;
  c.num_heads = lang.num_attention_heads;
  c.num_kv_heads = lang.num_key_value_heads > 0 ? lang.num_key_value_heads : lang.num_attention_heads;
  c.head_dim = lang.head_dim > 0 ? lang.head_dim : (c.num_heads > 0 ? lang.hidden_size / c.num_heads : 0);
  c.intermediate_size = lang.intermediate_size;
  c.norm = model::NormKind::kRms;
  c.norm_eps = static_cast<float>(lang.rms_norm_eps);
  c.rope_theta = static_cast<float>(lang.rope_theta);
  const vq::Vq16Config& v = config.gen_vision;
  for (auto [value, field] : {std::pair{c.num_layers, "language_config.num_hidden_layers"},
                              {c.hidden_size, "language_config.hidden_size"},
                              {c.num_heads, "language_config.num_attention_heads"},
                              {c.num_kv_heads, "language_config.num_key_value_heads"},
                              {c.head_dim, "language_config.head_dim"},
                              {c.intermediate_size, "language_config.intermediate_size"},
                              {lang.vocab_size, "language_config.vocab_size"},
                              {config.gen_head.image_token_size, "gen_head_config.params.image_token_size"},
                              {v.n_embed, "gen_vision_config.params.n_embed"},
                              {config.gen_head.image_token_embed, "gen_head_config.params.image_token_embed"}}) {
    if (absl::Status s = Positive(value, field); !s.ok()) return s;
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("config.json: language_config.num_attention_heads (", c.num_heads,
                                                   ") must be a multiple of num_key_value_heads (", c.num_kv_heads,
                                                   ")"));
  }
  if (c.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json: language_config.head_dim must be even for RoPE, got ", c.head_dim));
  }
  // MlpProjector mlp_gelu: Sequential(Linear, GELU, Linear): the input stage is exactly two Linears.
  if (config.gen_aligner.depth != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("config.json: gen_aligner_config.params.depth must be 2 (Linear, GELU, Linear), got ",
                     config.gen_aligner.depth));
  }

  const int64_t H = c.hidden_size, I = c.intermediate_size;
  const int64_t q_dim = int64_t{c.num_heads} * c.head_dim, kv_dim = int64_t{c.num_kv_heads} * c.head_dim;
  model::ModelSpec spec;
  spec.stack = c;
  spec.text_embed = Tensor("language_model.model.embed_tokens.weight", {lang.vocab_size, H});
  spec.layers.resize(c.num_layers);
  for (int32_t i = 0; i < c.num_layers; ++i) {
    const std::string p = absl::StrCat("language_model.model.layers.", i, ".");
    model::LayerRefs& l = spec.layers[i];
    l.input_norm = RmsNorm(p + "input_layernorm.weight", H);
    l.q = Linear(p + "self_attn.q_proj", q_dim, H, false);
    l.k = Linear(p + "self_attn.k_proj", kv_dim, H, false);
    l.v = Linear(p + "self_attn.v_proj", kv_dim, H, false);
    l.o = Linear(p + "self_attn.o_proj", H, q_dim, false);
    l.post_norm = RmsNorm(p + "post_attention_layernorm.weight", H);
    l.gate = Linear(p + "mlp.gate_proj", I, H, false);
    l.up = Linear(p + "mlp.up_proj", I, H, false);
    l.down = Linear(p + "mlp.down_proj", H, I, false);
  }
  spec.output.final_norm = RmsNorm("language_model.model.norm.weight", H);

  // Input stage: gen_embed rows (the image codes), then gen_aligner.
  const GenAlignerConfig& a = config.gen_aligner;
  spec.input.table = Tensor("gen_embed.weight", {v.image_token_size, v.n_embed});
  spec.input.fc1 = Linear("gen_aligner.layers.0", a.n_embed, a.input_dim, true);
  spec.input.fc2 = Linear("gen_aligner.layers.2", a.n_embed, a.n_embed, true);
  spec.input.sampled_offset = 0;

  // Output stage: gen_head over the image codes.
  const GenHeadConfig& h = config.gen_head;
  spec.output.projector = Linear("gen_head.output_mlp_projector", h.image_token_embed, h.n_embed, true);
  spec.output.head = Linear("gen_head.vision_head", h.image_token_size, h.image_token_embed, true);

  for (const vq::VqTensor& t : vq::VqDecoderTensors(v)) spec.decoder_tensors.push_back(Tensor(t.name, t.shape));
  if (absl::Status s = model::CheckSpec(spec); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("config.json: ", s.message()));
  }
  return spec;
}

}  // namespace argen::janus
