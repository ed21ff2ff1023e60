// The backend interface the generic engine (engine/model/generic_engine.h)
// drives. One implementation per device: engine/cpu (the reference) and
// engine/cuda. Designed for a GPU: every call carries a whole batch in
// contiguous host arrays (a few ints per row, copied to the device once per
// step), the KV cache lives in the backend, and CFG + sampling happen inside
// the backend, so the only thing that comes back per step is one token id per
// CFG pair. There is no per-element work on the host.
//
// Contract
// --------
// * Rows. A row is one sequence (the cond or the uncond half of one image).
//   AllocateRow reserves the row's KV region for its whole life: for every
//   layer and kv head, prompt_len positions for the prompt plus
//   policy.n_slots decode slots (n_slots = image_tokens for dense), i.e.
//   KvBytesForRow() bytes, counted in KvBytesInUse() until FreeRow. The row
//   also owns its sparsity policy state (engine/sparse), created from
//   `policy` at allocation; the backend asks it which slot each decode token
//   is written to and which slots are attended, and reports the attention
//   probabilities back to it, per layer and kv head.
// * Pairs. Batches list rows in CFG pairs: rows[2i] is the cond row and
//   rows[2i+1] the uncond row of pair i. Both rows of a pair have the same
//   prompt length and always advance together.
// * Prefill(rows, prompts) runs the prompts of newly allocated rows (text
//   token ids; embeddings read from language_model.model.embed_tokens), fills
//   their prompt KV, applies gen_head to the last prompt position of each row
//   and samples image token 0 of each pair (RNG step 0).
// * Decode(rows, image tokens, steps) feeds, for each pair, image token `t`
//   = steps[i] (the token sampled by the previous call) to both rows through
//   gen_embed -> gen_aligner (Linear, GELU, Linear) at position
//   prompt_len + t, stores its K/V in the slot the row's policy chooses,
//   attends the prompt KV plus the policy's attended slots, applies gen_head
//   and samples image token t + 1 of each pair (RNG step t + 1).
// * Sampling follows engine/model/sampler.h exactly, with uniforms from
//   kernels/sampling_rng.h keyed (seed, image_index, step).
// * Outputs: one sampled token per pair; optionally (tests, tools) the raw
//   gen_head logits of every row, [n_rows x image_vocab], before CFG.
// * Errors: an unknown/freed row, a position outside the row's region, a
//   token id outside its vocabulary, or a batch over max_batch_rows gives
//   InvalidArgument naming the field; running out of KV pool gives
//   ResourceExhausted from AllocateRow. Calls are not thread-safe (the
//   engine calls from one thread).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model/sampler.h"
#include "engine/sparse/policy_params.h"

namespace argen::model {

// Shapes of the Janus-Pro generation path (language_config, gen_* configs).
struct ModelDims {
  int32_t num_layers = 0;
  int32_t hidden_size = 0;
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;  // hidden_size / num_heads
  int32_t intermediate_size = 0;
  int32_t text_vocab = 0;  // rows of language_model.model.embed_tokens
  float rms_norm_eps = 1e-6f;
  float rope_theta = 10000.0f;
  int32_t image_vocab = 0;      // gen_vision / gen_head image_token_size
  int32_t image_embed_dim = 0;  // gen_embed width (gen_aligner input_dim)
  int32_t head_embed_dim = 0;   // gen_head image_token_embed
};

struct BackendOptions {
  int32_t threads = 0;           // CPU threads; 0: all cores
  int64_t kv_budget_bytes = 0;   // KV pool size; 0: backend default
  int32_t max_batch_rows = 256;  // rows per Prefill/Decode call
  int32_t max_prompt_tokens = 1024;
};

using RowId = int32_t;

// Prompts of newly allocated rows (CFG pairs, see the contract above).
struct PrefillBatch {
  std::span<const RowId> rows;             // 2 * n_pairs
  std::span<const int32_t> token_offsets;  // n_rows + 1 offsets into tokens
  std::span<const int32_t> tokens;         // text token ids, rows concatenated
  std::span<const SamplingSpec> sampling;  // n_pairs
};

// One decode step of running rows.
struct DecodeBatch {
  std::span<const RowId> rows;             // 2 * n_pairs
  std::span<const int32_t> image_tokens;   // n_pairs: input image token ids
  std::span<const int32_t> steps;          // n_pairs: index t of that input token
  std::span<const SamplingSpec> sampling;  // n_pairs
};

struct StepOutputs {
  std::span<int32_t> sampled;   // n_pairs: the image token drawn for each pair
  float* row_logits = nullptr;  // optional [n_rows x image_vocab] gen_head logits
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const ModelDims& dims() const = 0;
  virtual std::string name() const = 0;  // "cpu", "cuda"

  // K+V bytes of one token position of one row, all layers (the KV element
  // width is the backend's: f32 on CPU, bf16 on CUDA).
  virtual int64_t KvBytesPerTokenRow() const = 0;
  int64_t KvBytesForRow(int32_t prompt_len, int32_t n_slots) const {
    return KvBytesPerTokenRow() * (static_cast<int64_t>(prompt_len) + n_slots);
  }

  virtual absl::StatusOr<RowId> AllocateRow(int32_t prompt_len,
                                            const sparse::ResolvedPolicy& policy) = 0;
  virtual void FreeRow(RowId row) = 0;  // unknown ids are ignored
  virtual int64_t KvBytesInUse() const = 0;

  virtual absl::Status Prefill(const PrefillBatch& batch, const StepOutputs& out) = 0;
  virtual absl::Status Decode(const DecodeBatch& batch, const StepOutputs& out) = 0;
};

}  // namespace argen::model
