#include "engine/cpu/cpu_weights.h"

#include <utility>

#include "engine/cpu/ops.h"

namespace argen::cpu {
namespace {

using model::LinearRef;
using model::NormRef;
using model::TensorRef;
using model::WeightSource;

absl::Status Load(const WeightSource& src, const TensorRef& t, std::vector<float>* out) {
  if (!t.present()) {
    out->clear();
    return absl::OkStatus();
  }
  absl::StatusOr<std::vector<float>> v = src.Load(t);
  if (!v.ok()) return v.status();
  *out = *std::move(v);
  return absl::OkStatus();
}

// Appends tensor `t` to `fused` (row-major concatenation along rows).
absl::Status Append(const WeightSource& src, const TensorRef& t, std::vector<float>* fused) {
  absl::StatusOr<std::vector<float>> v = src.Load(t);
  if (!v.ok()) return v.status();
  fused->insert(fused->end(), v->begin(), v->end());
  return absl::OkStatus();
}

absl::Status LoadNorm(const WeightSource& src, const NormRef& n, NormWeights* out) {
  if (absl::Status s = Load(src, n.weight, &out->weight); !s.ok()) return s;
  return Load(src, n.bias, &out->bias);
}

absl::Status LoadLinear(const WeightSource& src, const LinearRef& l, LinearWeights* out) {
  if (absl::Status s = Load(src, l.weight, &out->weight); !s.ok()) return s;
  return Load(src, l.bias, &out->bias);
}

}  // namespace

absl::StatusOr<CpuWeights> LoadCpuWeights(const model::ModelSpec& spec,
                                          std::shared_ptr<const model::WeightSource> source,
                                          model::WeightFormat format) {
  const WeightSource& src = *source;
  CpuWeights w;
  w.format = format;
  w.layers.resize(spec.layers.size());
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    const model::LayerRefs& r = spec.layers[i];
    LayerWeights& lw = w.layers[i];
    lw.qkv.reserve(r.q.weight.used_elements() + r.k.weight.used_elements() + r.v.weight.used_elements());
    lw.gate_up.reserve(r.gate.weight.used_elements() + r.up.weight.used_elements());
    for (absl::Status s :
         {LoadNorm(src, r.input_norm, &lw.input_norm), Append(src, r.q.weight, &lw.qkv),
          Append(src, r.k.weight, &lw.qkv), Append(src, r.v.weight, &lw.qkv), Load(src, r.o.weight, &lw.o),
          LoadNorm(src, r.q_norm, &lw.q_norm), LoadNorm(src, r.k_norm, &lw.k_norm),
          LoadNorm(src, r.post_norm, &lw.post_norm), Append(src, r.gate.weight, &lw.gate_up),
          Append(src, r.up.weight, &lw.gate_up), Load(src, r.down.weight, &lw.down)}) {
      if (!s.ok()) return s;
    }
    if (spec.stack.qkv_bias) {
      for (const model::LinearRef* p : {&r.q, &r.k, &r.v}) {
        if (absl::Status s = Append(src, p->bias, &lw.qkv_bias); !s.ok()) return s;
      }
    }
    if (format == model::WeightFormat::kFp8) {
      const int32_t H = spec.stack.hidden_size, q_dim = spec.stack.num_heads * spec.stack.head_dim;
      const int32_t I = spec.stack.intermediate_size;
      for (auto [m, cols] :
           {std::pair{&lw.qkv, H}, std::pair{&lw.o, q_dim}, std::pair{&lw.gate_up, H}, std::pair{&lw.down, I}}) {
        RoundRowsThroughE4m3(m->data(), static_cast<int64_t>(m->size()) / cols, cols, m->data());
      }
    }
  }
  for (absl::Status s :
       {LoadNorm(src, spec.output.final_norm, &w.final_norm), Load(src, spec.input.table, &w.input_table),
        LoadLinear(src, spec.input.fc1, &w.input_fc1), LoadLinear(src, spec.input.fc2, &w.input_fc2),
        LoadLinear(src, spec.output.projector, &w.projector), LoadLinear(src, spec.output.head, &w.head),
        LoadLinear(src, spec.input.vector_in, &w.vector_in), LoadLinear(src, spec.output.vector_out, &w.vector_out)}) {
    if (!s.ok()) return s;
  }
  w.source = std::move(source);
  return w;
}

}  // namespace argen::cpu
