#include "engine/model/model_spec.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace argen::model {

TensorRef Tensor(std::string name, std::vector<int64_t> shape, TensorFill fill) {
  TensorRef t;
  t.name = std::move(name);
  t.shape = std::move(shape);
  t.fill = fill;
  return t;
}

LinearRef Linear(const std::string& prefix, int64_t out, int64_t in, bool bias) {
  LinearRef l;
  l.weight = Tensor(prefix + ".weight", {out, in});
  if (bias) l.bias = Tensor(prefix + ".bias", {out}, TensorFill::kBias);
  return l;
}

NormRef RmsNorm(const std::string& name, int64_t dim) {
  NormRef n;
  n.weight = Tensor(name, {dim}, TensorFill::kOne);
  return n;
}

int64_t TensorRef::row_elements() const {
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

namespace {

void Add(std::vector<const TensorRef*>& out, const TensorRef& t) {
  if (t.present()) out.push_back(&t);
}
void Add(std::vector<const TensorRef*>& out, const LinearRef& l) {
  Add(out, l.weight);
  Add(out, l.bias);
}
void Add(std::vector<const TensorRef*>& out, const NormRef& n) {
  Add(out, n.weight);
  Add(out, n.bias);
}

std::string Shape(const std::vector<int64_t>& s) { return absl::StrCat("[", absl::StrJoin(s, ", "), "]"); }

absl::Status Bad(const TensorRef& t, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("tensor '", t.name, "' ", Shape(t.shape), ": ", why));
}

// `t` is present with exactly `shape` (and, for row blocks, the block lies inside it).
absl::Status Expect(const TensorRef& t, const char* what, const std::vector<int64_t>& shape) {
  if (!t.present()) return absl::InvalidArgumentError(absl::StrCat("model spec: ", what, " is missing"));
  if (t.repeat != 1) {
    // Stored rows used `repeat` times each: shape[0] / repeat rows are stored.
    if (t.repeat < 1 || t.rows >= 0 || shape.empty() || shape[0] % t.repeat != 0) {
      return Bad(t,
                 absl::StrCat("cannot repeat each row ", t.repeat, " times to make ", Shape(shape), " (", what, ")"));
    }
    std::vector<int64_t> stored = shape;
    stored[0] /= t.repeat;
    TensorRef whole = t;
    whole.repeat = 1;
    return Expect(whole, what, stored);
  }
  if (t.shape.size() != shape.size()) return Bad(t, absl::StrCat("expected ", Shape(shape), " (", what, ")"));
  for (size_t i = 0; i < shape.size(); ++i) {
    // Row blocks: shape[0] is the stored row count, checked below.
    if (i == 0 && t.rows >= 0) continue;
    if (t.shape[i] != shape[i]) return Bad(t, absl::StrCat("expected ", Shape(shape), " (", what, ")"));
  }
  if (t.rows >= 0 && (t.row_begin < 0 || t.row_begin + t.rows > t.shape[0] || t.rows != shape[0])) {
    return Bad(t, absl::StrCat("rows [", t.row_begin, ", ", t.row_begin + t.rows, ") of ", what,
                               " must lie inside the tensor and number ", shape[0]));
  }
  return absl::OkStatus();
}

absl::Status ExpectNorm(const NormRef& n, const char* what, NormKind kind, std::vector<int64_t> shape) {
  if (absl::Status s = Expect(n.weight, what, shape); !s.ok()) return s;
  if (kind == NormKind::kLayer) return Expect(n.bias, what, shape);
  if (n.bias.present()) return Bad(n.bias, absl::StrCat("an RMSNorm (", what, ") has no bias"));
  return absl::OkStatus();
}

absl::Status ExpectLinear(const LinearRef& l, const char* what, int64_t out, int64_t in, bool bias) {
  if (absl::Status s = Expect(l.weight, what, {out, in}); !s.ok()) return s;
  if (bias) return Expect(l.bias, what, {out});
  if (l.bias.present()) return Bad(l.bias, absl::StrCat(what, " has no bias"));
  return absl::OkStatus();
}

}  // namespace

std::vector<const TensorRef*> AllTensors(const ModelSpec& spec) {
  std::vector<const TensorRef*> out;
  Add(out, spec.text_embed);
  for (const LayerRefs& l : spec.layers) {
    Add(out, l.input_norm);
    for (const LinearRef* p : {&l.q, &l.k, &l.v, &l.o}) Add(out, *p);
    Add(out, l.q_norm);
    Add(out, l.k_norm);
    Add(out, l.post_norm);
    for (const LinearRef* p : {&l.gate, &l.up, &l.down}) Add(out, *p);
  }
  Add(out, spec.output.final_norm);
  // The input table may be the text embedding table itself (listed once).
  if (spec.input.table.name != spec.text_embed.name) Add(out, spec.input.table);
  Add(out, spec.input.fc1);
  Add(out, spec.input.fc2);
  Add(out, spec.output.projector);
  // The head may be the text embedding table (tied weights).
  if (spec.output.head.weight.name != spec.text_embed.name) Add(out, spec.output.head.weight);
  Add(out, spec.output.head.bias);
  Add(out, spec.input.vector_in);
  Add(out, spec.output.vector_out);
  for (const TensorRef& t : spec.decoder_tensors) Add(out, t);
  return out;
}

absl::Status CheckSpec(const ModelSpec& spec) {
  const StackConfig& c = spec.stack;
  auto positive = [](int64_t v, const char* field) -> absl::Status {
    if (v > 0) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat("model spec: ", field, " must be positive, got ", v));
  };
  for (auto [v, f] : {std::pair<int64_t, const char*>{c.num_layers, "num_layers"},
                      {c.hidden_size, "hidden_size"},
                      {c.num_heads, "num_heads"},
                      {c.num_kv_heads, "num_kv_heads"},
                      {c.head_dim, "head_dim"},
                      {c.intermediate_size, "intermediate_size"}}) {
    if (absl::Status s = positive(v, f); !s.ok()) return s;
  }
  if (c.num_heads % c.num_kv_heads != 0) {
    return absl::InvalidArgumentError(absl::StrCat("model spec: num_heads (", c.num_heads,
                                                   ") must be a multiple of num_kv_heads (", c.num_kv_heads, ")"));
  }
  if (c.head_dim % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat("model spec: head_dim must be even for RoPE, got ", c.head_dim));
  }
  if (c.rope == RopeKind::kGrid2d) {
    if (c.head_dim % 4 != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("model spec: 2-D RoPE needs head_dim divisible by 4, got ", c.head_dim));
    }
    if (c.rope_grid_width <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("model spec: 2-D RoPE needs rope_grid_width > 0, got ", c.rope_grid_width));
    }
  }
  if (!(c.norm_eps > 0) || !(c.qk_norm_eps > 0) || !(c.rope_theta > 0)) {
    return absl::InvalidArgumentError("model spec: norm_eps, qk_norm_eps and rope_theta must be positive");
  }
  if (static_cast<int32_t>(spec.layers.size()) != c.num_layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("model spec: ", spec.layers.size(), " layers listed, num_layers is ", c.num_layers));
  }
  const int64_t H = c.hidden_size, I = c.intermediate_size;
  const int64_t q_dim = int64_t{c.num_heads} * c.head_dim, kv_dim = int64_t{c.num_kv_heads} * c.head_dim;
  if (!spec.text_embed.present() || spec.text_embed.shape.size() != 2 || spec.text_embed.shape[1] != H) {
    return absl::InvalidArgumentError(
        absl::StrCat("model spec: text_embed '", spec.text_embed.name, "' must be [text_vocab, ", H, "]"));
  }
  for (const LayerRefs& l : spec.layers) {
    for (absl::Status s :
         {ExpectNorm(l.input_norm, "input norm", c.norm, {H}), ExpectLinear(l.q, "q_proj", q_dim, H, c.qkv_bias),
          ExpectLinear(l.k, "k_proj", kv_dim, H, c.qkv_bias), ExpectLinear(l.v, "v_proj", kv_dim, H, c.qkv_bias),
          ExpectLinear(l.o, "o_proj", H, q_dim, false), ExpectNorm(l.post_norm, "post norm", c.norm, {H}),
          ExpectLinear(l.gate, "gate_proj", I, H, false), ExpectLinear(l.up, "up_proj", I, H, false),
          ExpectLinear(l.down, "down_proj", H, I, false)}) {
      if (!s.ok()) return s;
    }
    if (c.qk_norm) {
      for (absl::Status s : {ExpectNorm(l.q_norm, "q_norm", NormKind::kLayer, {c.num_heads, c.head_dim}),
                             ExpectNorm(l.k_norm, "k_norm", NormKind::kLayer, {c.num_kv_heads, c.head_dim})}) {
        if (!s.ok()) return s;
      }
    } else if (l.q_norm.weight.present() || l.k_norm.weight.present()) {
      return absl::InvalidArgumentError("model spec: q_norm/k_norm listed but qk_norm is off");
    }
  }
  if (absl::Status s = ExpectNorm(spec.output.final_norm, "final norm", c.norm, {H}); !s.ok()) return s;

  const InputStage& in = spec.input;
  const OutputStage& out = spec.output;
  if (out.token_dim < 0) return positive(out.token_dim, "output.token_dim");
  if (spec.vector_tokens()) {
    // A vector model: tokens in through vector_in, out through the token head;
    // an input table and a logits head are optional (text ids, if any).
    if (!in.vector_in.present()) {
      return absl::InvalidArgumentError("model spec: a vector model (output.token_dim > 0) needs input.vector_in");
    }
    if (absl::Status s = ExpectLinear(in.vector_in, "input vector_in", H, out.token_dim, in.vector_in.bias.present());
        !s.ok()) {
      return s;
    }
    if (out.vector_out.present()) {
      if (out.vector_out.weight.shape.size() != 2) return Bad(out.vector_out.weight, "vector_out must be 2-D");
      if (absl::Status s = ExpectLinear(out.vector_out, "output vector_out", out.vector_out.weight.shape[0], H,
                                        out.vector_out.bias.present());
          !s.ok()) {
        return s;
      }
    }
    if (!out.head.present()) {  // no logits: the table, if any, holds the forced ids' rows
      if (in.table.present() && (in.table.shape.size() != 2 || in.table.shape[1] != H || in.fc1.present())) {
        return Bad(in.table, absl::StrCat("a vector model's input table must be [rows, hidden_size ", H, "]"));
      }
      return absl::OkStatus();
    }
  } else if (in.vector_in.present() || out.vector_out.present()) {
    return absl::InvalidArgumentError("model spec: vector_in/vector_out listed but output.token_dim is 0");
  }
  if (!in.table.present() || in.table.shape.size() != 2 || in.table.rows >= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("model spec: the input table '", in.table.name, "' must be a whole 2-D tensor"));
  }
  const int64_t width = in.table.shape[1];
  if (in.fc1.present() != in.fc2.present()) {
    return absl::InvalidArgumentError("model spec: the input MLP needs both of its Linears");
  }
  if (in.fc1.present()) {
    if (absl::Status s = ExpectLinear(in.fc1, "input fc1", H, width, true); !s.ok()) return s;
    if (absl::Status s = ExpectLinear(in.fc2, "input fc2", H, H, true); !s.ok()) return s;
  } else if (width != H) {
    return Bad(in.table, absl::StrCat("without an input MLP the table's rows must be hidden_size (", H, ") wide"));
  }

  int64_t head_in = H;
  if (out.projector.present()) {
    if (out.projector.weight.shape.size() != 2) return Bad(out.projector.weight, "the projector must be 2-D");
    head_in = out.projector.weight.shape[0];
    if (absl::Status s = ExpectLinear(out.projector, "output projector", head_in, H, true); !s.ok()) return s;
  }
  if (!out.head.present() || out.head.weight.shape.size() != 2) {
    return absl::InvalidArgumentError("model spec: the output head must be a 2-D tensor");
  }
  const int64_t logits = out.head.weight.used_rows();
  if (absl::Status s = ExpectLinear(out.head, "output head", logits, head_in, out.head.bias.present()); !s.ok()) {
    return s;
  }
  if (out.head.bias.present() && out.head.weight.rows >= 0) {
    return Bad(out.head.bias, "a head restricted to a row range has no bias");
  }
  if (logits < 1) return Bad(out.head.weight, "the head gives no logits");
  if (in.sampled_offset < 0 || in.sampled_offset + logits > in.table.shape[0]) {
    return Bad(in.table, absl::StrCat("sampled logits [0, ", logits, ") + offset ", in.sampled_offset,
                                      " must be rows of the input table"));
  }
  return absl::OkStatus();
}

}  // namespace argen::model
