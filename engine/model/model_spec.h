// What a backend runs, independent of the model family and of the device: a
// Llama-style decoder stack with the switches the known families need, the
// input stage in front of it, the output stage after it, and where every
// weight comes from (the tensor map). A family (engine/families/<family>/)
// builds one from its config.json; the same map validates a checkpoint
// (ValidateTensors) and loads it into each device's layout (engine/cpu,
// engine/cuda), so every tensor is named in exactly one place.
//
// The stack, per layer (x: the residual stream, [tokens x hidden]):
//   pre-norm (default)           swin_norm (Chameleon's post-norm placement)
//   h = x + o(attn(norm1(x)))    h = x + norm1(o(attn(x)))
//   x = h + down(mlp(norm2(h)))  x = h + norm2(down(mlp(h)))
// attn: q, k, v projections; with qk_norm a LayerNorm over head_dim per head
// (weight and bias [heads, head_dim], HF ChameleonLayerNorm) on q and k; then
// RoPE (below); MHA or GQA. mlp: SwiGLU,
// silu(gate(x)) * up(x). norm: RMSNorm (weight) or LayerNorm (weight, bias).
//
// Input stage (a decode step's input): row `id` of a table, optionally
// followed by Linear, GELU, Linear (with biases): Janus' gen_embed ->
// gen_aligner; a Chameleon-style model reads its text embedding table.
// Output stage: final norm, optionally a projector Linear + GELU, then the
// head's rows [row_begin, row_begin + rows) only: the logits over the model's
// image codes (Janus' gen_head; Chameleon's lm_head restricted to its image
// token ids). Logit v of the sampled range feeds back as table row
// input.sampled_offset + v.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace argen::model {

enum class NormKind : int32_t { kRms = 0, kLayer = 1 };

// Where a query's rotary angles come from.
//  k1d: HF rotate_half over (i, i + head_dim/2); the angle of pair i at
//    position p (prompt p, decode t at prompt_len + t) is p * theta^(-2i/head_dim).
//  kGrid2d: LlamaGen's 2-D RoPE (gpt.py precompute_freqs_cis_2d +
//    apply_rotary_emb): interleaved pairs (2i, 2i + 1); decode index t is
//    grid cell (t / rope_grid_width, t % rope_grid_width); the first
//    head_dim/4 pairs turn by its row, the others by its column, pair m of
//    each half at theta^(-4m/head_dim). Prompt queries (the class or caption
//    slots) are position-free: cos = sin = 0, so their q and k are zero.
//    The angles derive from the query's index and the grid alone, so the
//    step plan carries nothing new.
enum class RopeKind : int32_t { k1d = 0, kGrid2d = 1 };

// What a random weight source puts into a tensor (benchmarks without a checkpoint).
enum class TensorFill : int32_t { kMatrix = 0, kBias = 1, kOne = 2, kZero = 3 };

// One checkpoint tensor, or a block of rows of a 2-D one.
struct TensorRef {
  std::string name;            // empty: absent (an optional part of the model)
  std::vector<int64_t> shape;  // as stored in the checkpoint (validated)
  int64_t row_begin = 0;       // 2-D tensors: rows [row_begin, row_begin + rows) are used
  int64_t rows = -1;           // -1: every row
  TensorFill fill = TensorFill::kMatrix;
  // Each stored row is used `repeat` times in a row (torch repeat_interleave
  // along axis 0): Lumina-mGPT's q/k-norm weights, one row per model-parallel
  // group shared by heads / groups heads. Whole tensors only.
  int32_t repeat = 1;

  bool present() const { return !name.empty(); }
  int64_t used_rows() const { return (rows >= 0 ? rows : (shape.empty() ? 0 : shape[0])) * repeat; }
  int64_t row_elements() const;  // product of shape[1:] (1 for a vector)
  int64_t used_elements() const { return used_rows() * row_elements(); }
};

// y = x W^T (+ b), W [out, in] (a torch Linear weight).
struct LinearRef {
  TensorRef weight, bias;  // bias absent: no bias
  bool present() const { return weight.present(); }
  int64_t out() const { return weight.used_rows(); }
  int64_t in() const { return weight.row_elements(); }
};

struct NormRef {
  TensorRef weight, bias;  // bias: LayerNorm only
};

struct StackConfig {
  int32_t num_layers = 0;
  int32_t hidden_size = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  int32_t intermediate_size = 0;
  NormKind norm = NormKind::kRms;  // the layers' two norms and the final norm
  float norm_eps = 1e-6f;
  bool qkv_bias = false;      // q, k and v projections with biases (Qwen2: NextStep-1)
  bool qk_norm = false;       // LayerNorm over head_dim per head on q and k, before RoPE
  float qk_norm_eps = 1e-5f;  // HF ChameleonLayerNorm fixes 1e-5
  bool swin_norm = false;     // post-norm placement (see the top of this file)
  float rope_theta = 10000.0f;
  RopeKind rope = RopeKind::k1d;
  int32_t rope_grid_width = 0;  // kGrid2d: image tokens per grid row
};

struct LayerRefs {
  NormRef input_norm;  // before attention (pre-norm) or on its output (swin)
  LinearRef q, k, v, o;
  NormRef q_norm, k_norm;  // weight and bias [heads (kv_heads), head_dim] once repeated; qk_norm only
  NormRef post_norm;       // before the MLP (pre-norm) or on its output (swin)
  LinearRef gate, up, down;
};

struct InputStage {
  TensorRef table;             // [rows, width]; absent: a vector model without input ids
  LinearRef fc1, fc2;          // both or neither; neither: width == hidden_size
  int32_t sampled_offset = 0;  // table row of sampled logit 0
  // Vector models (OutputStage::token_dim > 0): a token vector's input,
  // Linear [hidden_size, token_dim] (NextStep-1's image_in_projector).
  LinearRef vector_in;
};

struct OutputStage {
  NormRef final_norm;
  LinearRef projector;  // absent: none (else Linear then GELU)
  LinearRef head;       // its weight's used rows are the logits; absent in a vector model
  // Vector models: tokens are vectors of token_dim floats drawn by the
  // family's token head (engine/model/token_head.h) from the final-normed
  // hidden state, through vector_out when present (a Linear, no activation:
  // NextStep-1's image_out_projector). 0: tokens are codes (the head's logits).
  int32_t token_dim = 0;
  LinearRef vector_out;
};

struct ModelSpec {
  StackConfig stack;
  TensorRef text_embed;  // prompt token embeddings [text_vocab, hidden], read by rows
  std::vector<LayerRefs> layers;
  InputStage input;
  OutputStage output;
  // Tensors of the family's image decoder: validated with the rest, loaded by the decoder.
  std::vector<TensorRef> decoder_tensors;

  int32_t text_vocab() const { return static_cast<int32_t>(text_embed.used_rows()); }
  int32_t input_rows() const { return static_cast<int32_t>(input.table.used_rows()); }
  int32_t input_width() const { return static_cast<int32_t>(input.table.row_elements()); }
  int32_t logits() const { return output.head.present() ? static_cast<int32_t>(output.head.out()) : 0; }
  bool vector_tokens() const { return output.token_dim > 0; }
  // The width of what the token head takes (vector models).
  int32_t vector_head_in() const {
    return output.vector_out.present() ? static_cast<int32_t>(output.vector_out.out()) : stack.hidden_size;
  }
  int32_t head_in() const { return static_cast<int32_t>(output.head.in()); }
  int32_t projector_out() const {
    return output.projector.present() ? static_cast<int32_t>(output.projector.out()) : 0;
  }
};

// Builders a family's tensor map is written with.
// `name` of `shape`; `fill` says what random weights put there.
TensorRef Tensor(std::string name, std::vector<int64_t> shape, TensorFill fill = TensorFill::kMatrix);
// <prefix>.weight [out, in], and <prefix>.bias [out] when `bias`.
LinearRef Linear(const std::string& prefix, int64_t out, int64_t in, bool bias = false);
// An RMSNorm weight `name` of [dim] (ones when random).
NormRef RmsNorm(const std::string& name, int64_t dim);

// Every tensor the spec names, each once, in model order (language model,
// stages, then the decoder's).
std::vector<const TensorRef*> AllTensors(const ModelSpec& spec);

// The spec is self-consistent: shapes agree with the stack config and with
// each other, row ranges lie inside their tensors, the switches have their
// tensors. Errors name the tensor or field (a config that implies
// inconsistent shapes, or a family bug).
absl::Status CheckSpec(const ModelSpec& spec);

}  // namespace argen::model
