#include "engine/families/llamagen/llamagen_spec.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace argen::llamagen {
namespace {

// Rows [begin, begin + rows) of the fused wqkv [q_dim + 2 kv_dim, dim] (gpt.py splits it q, k, v).
model::LinearRef Block(const std::string& name, int64_t total, int64_t begin, int64_t rows, int64_t in) {
  model::LinearRef l;
  l.weight = model::Tensor(name, {total, in});
  l.weight.row_begin = begin;
  l.weight.rows = rows;
  return l;
}

}  // namespace

absl::StatusOr<model::ModelSpec> LlamaGenSpec(const LlamaGenConfig& c) {
  model::ModelSpec spec;
  model::StackConfig& s = spec.stack;
  s.num_layers = c.n_layer;
  s.hidden_size = c.dim;
  s.num_heads = c.n_head;
  s.num_kv_heads = c.n_kv_head;
  s.head_dim = c.head_dim();
  s.intermediate_size = c.ffn_hidden;
  s.norm = model::NormKind::kRms;
  s.norm_eps = c.norm_eps;
  s.rope_theta = c.rope_base;
  s.rope = model::RopeKind::kGrid2d;
  s.rope_grid_width = c.grid();
  const int64_t H = c.dim, q_dim = int64_t{c.n_head} * s.head_dim, kv_dim = int64_t{c.n_kv_head} * s.head_dim;
  const int64_t qkv = q_dim + 2 * kv_dim;
  if (c.text_conditional) {
    // t2i prompts are embeddings (the caption MLP's, StepPlan::prompt_embeddings), never ids: no
    // prompt query reads a text table, but the spec names one, so it names the image-token table
    // (loaded once: the input stage's), which the engine never indexes with a prompt id.
    spec.text_embed = model::Tensor("tok_embeddings.weight", {c.vq.codebook_size, H});
  } else {
    spec.text_embed = model::Tensor("cls_embedding.embedding_table.weight", {c.class_rows, H});
  }
  for (int32_t i = 0; i < c.n_layer; ++i) {
    const std::string p = absl::StrCat("layers.", i, ".");
    model::LayerRefs l;
    l.input_norm = model::RmsNorm(p + "attention_norm.weight", H);
    const std::string wqkv = p + "attention.wqkv.weight";
    l.q = Block(wqkv, qkv, 0, q_dim, H);
    l.k = Block(wqkv, qkv, q_dim, kv_dim, H);
    l.v = Block(wqkv, qkv, q_dim + kv_dim, kv_dim, H);
    l.o = model::Linear(p + "attention.wo", H, q_dim);
    l.post_norm = model::RmsNorm(p + "ffn_norm.weight", H);
    l.gate = model::Linear(p + "feed_forward.w1", c.ffn_hidden, H);
    l.up = model::Linear(p + "feed_forward.w3", c.ffn_hidden, H);
    l.down = model::Linear(p + "feed_forward.w2", H, c.ffn_hidden);
    spec.layers.push_back(std::move(l));
  }
  spec.output.final_norm = model::RmsNorm("norm.weight", H);
  spec.output.head = model::Linear("output", c.vq.codebook_size, H);
  spec.input.table = model::Tensor("tok_embeddings.weight", {c.vq.codebook_size, H});
  if (absl::Status st = model::CheckSpec(spec); !st.ok()) return st;
  return spec;
}

}  // namespace argen::llamagen
