// The ModelSpec of a tests/goldens/stack checkpoint (HF Chameleon tensor
// names; tools/goldens/make_stack_goldens.py): the decoder-stack switches
// under test, the text embedding table as the input stage and lm_head rows
// [logit_begin, logit_begin + logit_count) as the head. Shared by the CPU
// golden test and the CUDA-vs-CPU gpu test.
#pragma once

#include <string>

#include "absl/strings/str_cat.h"
#include "engine/model/model_spec.h"
#include "nlohmann/json.hpp"

namespace argen::model::testing {

inline ModelSpec StackGoldenSpec(const nlohmann::json& golden) {
  const nlohmann::json& c = golden["config"];
  StackConfig s;
  s.num_layers = c["num_layers"].get<int32_t>();
  s.hidden_size = c["hidden_size"].get<int32_t>();
  s.num_heads = c["num_heads"].get<int32_t>();
  s.num_kv_heads = c["num_kv_heads"].get<int32_t>();
  s.head_dim = s.hidden_size / s.num_heads;
  s.intermediate_size = c["intermediate_size"].get<int32_t>();
  s.norm = c["norm"].get<std::string>() == "layer" ? NormKind::kLayer : NormKind::kRms;
  s.norm_eps = c["norm_eps"].get<float>();
  s.qk_norm = c["qk_norm"].get<bool>();
  s.qk_norm_eps = c["qk_norm_eps"].get<float>();
  s.swin_norm = c["swin_norm"].get<bool>();
  s.rope_theta = c["rope_theta"].get<float>();
  const int64_t H = s.hidden_size, I = s.intermediate_size, V = c["vocab_size"].get<int64_t>();
  const int64_t q = int64_t{s.num_heads} * s.head_dim, kv = int64_t{s.num_kv_heads} * s.head_dim;
  auto t = [](std::string name, std::vector<int64_t> shape, TensorFill fill = TensorFill::kMatrix) {
    TensorRef r;
    r.name = std::move(name);
    r.shape = std::move(shape);
    r.fill = fill;
    return r;
  };
  auto norm = [&](const std::string& prefix, std::vector<int64_t> shape, bool bias) {
    NormRef n;
    n.weight = t(prefix + ".weight", shape, TensorFill::kOne);
    if (bias) n.bias = t(prefix + ".bias", shape, TensorFill::kZero);
    return n;
  };
  auto linear = [&](const std::string& prefix, int64_t out, int64_t in) {
    LinearRef l;
    l.weight = t(prefix + ".weight", {out, in});
    return l;
  };
  const bool layer_norm = s.norm == NormKind::kLayer;
  ModelSpec spec;
  spec.stack = s;
  spec.text_embed = t("model.embed_tokens.weight", {V, H});
  spec.layers.resize(s.num_layers);
  for (int32_t i = 0; i < s.num_layers; ++i) {
    const std::string p = absl::StrCat("model.layers.", i, ".");
    LayerRefs& l = spec.layers[i];
    l.input_norm = norm(p + "input_layernorm", {H}, layer_norm);
    l.q = linear(p + "self_attn.q_proj", q, H);
    l.k = linear(p + "self_attn.k_proj", kv, H);
    l.v = linear(p + "self_attn.v_proj", kv, H);
    l.o = linear(p + "self_attn.o_proj", H, q);
    if (s.qk_norm) {
      l.q_norm = norm(p + "self_attn.q_norm", {s.num_heads, s.head_dim}, true);
      l.k_norm = norm(p + "self_attn.k_norm", {s.num_kv_heads, s.head_dim}, true);
    }
    l.post_norm = norm(p + "post_attention_layernorm", {H}, layer_norm);
    l.gate = linear(p + "mlp.gate_proj", I, H);
    l.up = linear(p + "mlp.up_proj", I, H);
    l.down = linear(p + "mlp.down_proj", H, I);
  }
  spec.output.final_norm = norm("model.norm", {H}, layer_norm);
  spec.input.table = spec.text_embed;
  spec.input.sampled_offset = golden["logit_begin"].get<int32_t>();
  spec.output.head.weight = t("lm_head.weight", {V, H});
  spec.output.head.weight.row_begin = golden["logit_begin"].get<int64_t>();
  spec.output.head.weight.rows = golden["logit_count"].get<int64_t>();
  return spec;
}

}  // namespace argen::model::testing
