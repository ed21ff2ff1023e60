// The device interface the generic engine (engine/model/generic_engine.h)
// drives: the decoder stack of a ModelSpec (engine/model/model_spec.h) with
// its input and output stages, implemented once per device: engine/cpu (the
// f32 reference) and engine/cuda. A backend knows no model family: the spec
// says which switches and stages to run and which tensors to load. Designed
// for a GPU: every call carries a whole batch in contiguous host arrays (a few
// ints per row, copied to the device once per step), the KV cache lives in
// the backend, and CFG + sampling happen inside the backend, so the only thing
// that comes back per step is one token per CFG pair. There is no
// per-element work on the host.
//
// Contract
// --------
// * Rows. A row is one sequence (the cond or the uncond half of one image).
//   AllocateRow reserves the row's region for its whole life: for every layer
//   and kv head, prompt_len positions for the prompt plus policy.n_slots
//   decode slots (n_slots = image_tokens for dense), and the row's sparsity
//   policy state; RowBytes() bytes of the pool, counted in KvBytesInUse()
//   until FreeRow. CanAllocateRows says exactly whether AllocateRow would
//   succeed that many times now (the one KV ledger: admission asks it). The
//   backend asks the row's policy (kernels/sparse/policy.h) which slot each
//   decode token is written to and which slots are attended, and reports the
//   attention probabilities back to it, per layer and kv head.
// * Pairs. Batches list rows in CFG pairs: rows[2i] is the cond row and
//   rows[2i+1] the uncond row of pair i. The rows of a pair may differ in
//   prompt length (each has its own positions) and always advance together.
// * The step. Forward(plan) runs one step of the decoder over a plan of
//   query tokens (engine/model/step_plan.h): each row of the step feeds zero
//   or more queries: prompt tokens (a whole prompt or a chunk of it: text
//   token ids, rows of spec.text_embed) or decode tokens (input ids: rows of
//   spec.input.table, the sampled logit plus input.sampled_offset or a token
//   the engine forced) at decode index t, position prompt_len + t. Each
//   query stores its K/V (a prompt position, or the slot the row's policy
//   chooses for t) and attends the prompt KV plus the policy's attended
//   slots, causal in raster order among the row's queries of the step. The
//   output stage runs at each pair's output points and samples: token 0 from
//   the last prompt positions in the step that completes the pair's prompts,
//   token t + 1 after decode query t. Prefill and Decode below are that step
//   for whole prompts and for one decode token per row.
// * Prefill(rows, prompts): the prompts of newly allocated rows, token 0 of
//   each pair (RNG step 0).
// * Decode(rows, input ids, steps): for each pair the input id of token
//   t = steps[i] fed to both rows, token t + 1 sampled (RNG step t + 1).
// * Sampling follows engine/model/sampler.h exactly, with uniforms from
//   kernels/sampling_rng.h keyed (seed, image_index, step); temperature 0 is
//   greedy (the argmax of the guided logits).
// * Outputs: one sampled logit index per pair, in [0, spec.logits());
//   optionally (tests, tools) the raw logits of every row, [n_rows x
//   spec.logits()], before CFG.
// * Prompt-KV sharing (AllocateSharingRow): rows with the same prompt (the
//   cond rows of one request's images; its uncond rows) can read one copy of
//   its prompt KV, the owner's, instead of each holding its own. A sharing
//   row's region is its decode slots only (SharingRowBytes). It is prefilled
//   in the same Prefill call as its owner, with the same prompt tokens, and
//   computes nothing there: its token-0 logits are the owner's last prompt
//   position's. FreeRow of an owner hides it at once; its region is freed
//   with its last sharer, so the ledger counts the shared bytes exactly once.
// * Prompt rows (prompt-KV sharing across requests, AllocatePromptRow): a
//   row that holds one prompt's KV and the hidden state of its last position
//   (PromptRowBytes) and decodes nothing; it is never in a batch's rows.
//   The Prefill call that lists it in PrefillBatch::prompt_rows fills it. A
//   row sharing it (AllocateSharingRow, any policy storing KV in the prompt
//   row's format) is prefilled in that call or any later one and computes
//   nothing: its token-0 logits come from the prompt row's last position. A
//   call may list prompt rows and no rows (then it samples nothing). FreeRow
//   of a prompt row with sharers hides it, as for an owner.
// * Errors: an unknown/freed row, a position outside the row's region, an id
//   outside its table, bad sampling or a batch over max_batch_rows gives
//   InvalidArgument naming the field (engine/model/batch_checks.h, shared by
//   every backend); running out of pool gives ResourceExhausted from
//   AllocateRow. Calls are not thread-safe (the engine calls from one thread).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model/model_spec.h"
#include "engine/model/sampler.h"
#include "engine/model/step_plan.h"
#include "engine/model/weight_format.h"
#include "engine/sparse/policy_params.h"

namespace argen::model {

struct BackendOptions {
  int32_t threads = 0;  // CPU threads; 0: all cores
  // Pool size; 0: backend default (cpu: unbounded; cuda: the device's free
  // memory after everything else and a safety margin, engine/cuda/pool_sizing.h).
  int64_t kv_budget_bytes = 0;
  // Rows per Prefill/Decode call; 0 (cuda only): sized from the device's memory.
  int32_t max_batch_rows = 256;
  int32_t max_prompt_tokens = 1024;
  int32_t decode_tokens = 0;  // L_dec; cuda auto sizing makes the policy plans for this many keys up front
  // The KV storage cuda's auto max_batch_rows sizes its reference row in (the
  // server's default kv_cache_dtype: fp8 rows are about half as large).
  sparse::KvFormat reference_kv_format = sparse::KvFormat::kAuto;
  // Whether that reference row reads its prompts from prompt rows with the
  // guidance prompt shared (the engine's sharing across requests is on).
  bool reference_guidance_shared = false;
  // The decoder layers' projection matrices (engine/model/weight_format.h).
  WeightFormat weight_format = WeightFormat::kAuto;
};

using RowId = int32_t;
struct RowState;  // engine/model/batch_checks.h
struct BatchLimits;

// Prompts of newly allocated rows (CFG pairs, see the contract above).
struct PrefillBatch {
  std::span<const RowId> rows;              // 2 * n_pairs
  std::span<const int32_t> token_offsets;   // n_rows + n_prompt_rows + 1 offsets into tokens
  std::span<const int32_t> tokens;          // text token ids: the rows', then the prompt rows', concatenated
  std::span<const SamplingSpec> sampling;   // n_pairs
  std::span<const RowId> prompt_rows = {};  // prompt rows this call fills (AllocatePromptRow)
};

// One decode step of running rows.
struct DecodeBatch {
  std::span<const RowId> rows;             // 2 * n_pairs
  std::span<const int32_t> image_tokens;   // n_pairs: input ids (rows of spec.input.table)
  std::span<const int32_t> steps;          // n_pairs: index t of that input token
  std::span<const SamplingSpec> sampling;  // n_pairs
};

struct StepOutputs {
  std::span<int32_t> sampled;   // n_pairs: the logit index drawn for each pair
  float* row_logits = nullptr;  // optional [n_rows x spec.logits()] logits
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const ModelSpec& spec() const = 0;
  virtual std::string name() const = 0;  // "cpu", "cuda"

  // K+V bytes of one token position of one row, all layers (the KV element
  // width is the backend's: f32 on CPU, bf16 on CUDA).
  virtual int64_t KvBytesPerTokenRow() const = 0;
  // Pool bytes one row with this prompt length and policy takes, exactly as
  // AllocateRow places it.
  virtual int64_t RowBytes(int32_t prompt_len, const sparse::ResolvedPolicy& policy) const = 0;
  // The pool's size in bytes (the KV budget).
  virtual int64_t PoolBytes() const = 0;
  // Rows per Prefill/Decode call (the batch cap), as sized.
  virtual int32_t MaxBatchRows() const = 0;
  // How the device's memory was split (one line for the start-up log); empty: nothing to say.
  virtual std::string MemorySizing() const { return {}; }
  // Whether `count` AllocateRow(prompt_len, policy) calls would all succeed now.
  virtual bool CanAllocateRows(int32_t prompt_len, const sparse::ResolvedPolicy& policy, int32_t count) const = 0;

  // Whether `pairs` x (AllocateRow(cond_len), AllocateRow(uncond_len)), in
  // that order, would all succeed now. The default covers equal lengths.
  virtual bool CanAllocatePairs(int32_t cond_len, int32_t uncond_len, const sparse::ResolvedPolicy& policy,
                                int32_t pairs) const {
    if (cond_len == uncond_len) return CanAllocateRows(cond_len, policy, 2 * pairs);
    return false;  // a backend with unequal pairs overrides this
  }

  // Prompt-KV sharing (see the contract); a backend without it keeps these defaults.
  virtual bool SupportsPromptSharing() const { return false; }
  // Pool bytes of a row sharing the prompt KV of an owner with this prompt length and policy.
  virtual int64_t SharingRowBytes(int32_t prompt_len, const sparse::ResolvedPolicy& policy) const {
    return RowBytes(prompt_len, policy);
  }
  // Whether the rows of one request of `images` CFG pairs would all be
  // allocated now: without sharing as CanAllocatePairs; with it, the first
  // pair owning the prompts and every later pair sharing them, in that order.
  virtual bool CanAllocateGroup(int32_t cond_len, int32_t uncond_len, const sparse::ResolvedPolicy& policy,
                                int32_t images, bool share) const {
    return !share && CanAllocatePairs(cond_len, uncond_len, policy, images);
  }
  // A row with the prompt length of `owner` (a live row or prompt row that
  // is not itself a sharer) and `policy`, reading the owner's prompt KV;
  // policy.kv_format must be the owner's.
  virtual absl::StatusOr<RowId> AllocateSharingRow(RowId owner, const sparse::ResolvedPolicy& policy) {
    (void)owner;
    (void)policy;
    return absl::UnimplementedError(name() + " backend: prompt-KV sharing is not supported");
  }

  // Prompt rows (see the contract); a backend without them keeps these defaults.
  virtual bool SupportsPromptRows() const { return false; }
  // Pool bytes of a prompt row of this length storing its KV in `format`.
  virtual int64_t PromptRowBytes(int32_t prompt_len, sparse::KvFormat format) const {
    (void)prompt_len;
    (void)format;
    return 0;
  }
  virtual absl::StatusOr<RowId> AllocatePromptRow(int32_t prompt_len, sparse::KvFormat format) {
    (void)prompt_len;
    (void)format;
    return absl::UnimplementedError(name() + " backend: prompt rows are not supported");
  }
  // Whether allocations of these pool sizes (RowBytes, SharingRowBytes,
  // PromptRowBytes), made in this order, would all succeed now.
  virtual bool CanPlace(std::span<const int64_t> sizes) const {
    (void)sizes;
    return false;
  }

  virtual absl::StatusOr<RowId> AllocateRow(int32_t prompt_len, const sparse::ResolvedPolicy& policy) = 0;
  virtual void FreeRow(RowId row) = 0;  // unknown ids are ignored
  virtual int64_t KvBytesInUse() const = 0;

  // One step of the plan's query tokens (the contract above). Errors:
  // InvalidArgument naming the plan's field (engine/model/step_checks.h),
  // with no state changed.
  virtual absl::Status Forward(const StepPlan& plan, const StepOutputs& out) = 0;

  // Forward for whole prompts of newly allocated rows / one decode token per
  // row; their batch errors name PrefillBatch / DecodeBatch fields.
  absl::Status Prefill(const PrefillBatch& batch, const StepOutputs& out);
  absl::Status Decode(const DecodeBatch& batch, const StepOutputs& out);

  // The live row of an id, or nullptr, and the batch limits (for the shared
  // batch checks, engine/model/batch_checks.h).
  virtual RowState* FindLiveRow(RowId id) = 0;
  virtual BatchLimits Limits() const = 0;
};

}  // namespace argen::model
