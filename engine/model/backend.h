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
//   The KV manager (engine/kv/kv_manager.h, one for every device) places
//   rows: it reserves a row's region for its whole life (for every layer and
//   kv head, prompt_len positions for the prompt plus policy.n_slots decode
//   slots, n_slots = image_tokens for dense, and the row's sparsity policy
//   state: RowBytes() bytes of the pool, KvPool), keeps the table of rows and
//   the one ledger admission asks, and tells the backend (RowPlaced /
//   RowFreed), which sets up and computes on the row's storage only. The
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
//   slots, causal in raster order among the row's queries of the step. A
//   plan that allows it (StepPlan::out_of_order, parallel decoding; a policy
//   that plans it, sparse::PlansOutOfOrder) may give a row non-consecutive, not yet written indices and
//   provisional queries that write nothing (step_plan.h); a backend that
//   cannot run such a plan refuses it with UNIMPLEMENTED, before any state
//   changes (PlannedStep::all_in_order). A plan may also rewind an in-order
//   row (StepPlan::rewinds, speculative decoding; dense policy): start it
//   below its next step, rewriting those indices; a backend that cannot
//   (SupportsRewind() false) refuses it with UNIMPLEMENTED. The
//   output stage runs at each pair's output points and samples: token 0 from
//   the last prompt positions in the step that completes the pair's prompts,
//   token t + 1 after decode query t. Prefill and Decode below are that step
//   for whole prompts and for one decode token per row.
// * Prefill(rows, prompts): the prompts of newly placed rows, token 0 of
//   each pair (RNG step 0).
// * Decode(rows, input ids, steps): for each pair the input id of token
//   t = steps[i] fed to both rows, token t + 1 sampled (RNG step t + 1).
// * Sampling follows engine/model/sampler.h exactly, with uniforms from
//   kernels/sampling_rng.h keyed (seed, image_index, step); temperature 0 is
//   greedy (the argmax of the guided logits).
// * Outputs: one sampled logit index per pair, in [0, spec.logits());
//   optionally (tests, tools) the raw logits of every row, [n_rows x
//   spec.logits()], before CFG.
// * Prompt-KV sharing (KvManager::AllocateSharingRow): rows with the same
//   prompt (the cond rows of one request's images; its uncond rows) can read
//   one copy of its prompt KV, the owner's, instead of each holding its own.
//   A sharing row's region is its decode slots only (SharingRowBytes). It is
//   prefilled in the same Prefill call as its owner, with the same prompt
//   tokens, and computes nothing there: its token-0 logits are the owner's
//   last prompt position's. Freeing an owner hides it at once; its region is
//   freed with its last sharer, so the ledger counts the shared bytes once.
// * Prompt rows (prompt-KV sharing across requests,
//   KvManager::AllocatePromptRow): a row that holds one prompt's KV and the
//   hidden state of its last position (PromptRowBytes) and decodes nothing;
//   it is never in a batch's rows. The Prefill call that lists it in
//   PrefillBatch::prompt_rows fills it. A row sharing it (any policy storing
//   KV in the prompt row's format) is prefilled in that call or any later
//   one and computes nothing: its token-0 logits come from the prompt row's
//   last position. A call may list prompt rows and no rows (then it samples
//   nothing). Freeing a prompt row with sharers hides it, as for an owner.
// * Errors: an unknown/freed row, a position outside the row's region, an id
//   outside its table, bad sampling or a batch over max_batch_rows gives
//   InvalidArgument naming the field (engine/model/batch_checks.h, shared by
//   every backend); running out of pool gives ResourceExhausted from the
//   KV manager's allocation. Calls are not thread-safe (the engine calls from one thread).
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
#include "engine/model/token_head.h"
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
  // A vector model's output stage (spec.output.token_dim > 0), from its
  // family: required by such a model, refused by any other. The CPU backend
  // runs it on the host (Draw); the CUDA backend builds its own device head
  // from the head's flow_matching() description and refuses a head without
  // one (UNIMPLEMENTED).
  std::shared_ptr<const TokenHead> token_head;
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
  std::span<int32_t> sampled;   // one per output point: the logit index drawn (0 for a vector model)
  float* row_logits = nullptr;  // optional [n_rows x spec.logits()] logits (code models only)
  // Optional, vector models (spec.output.token_dim > 0): [output points x
  // token_dim], the token vectors the output stage made (step_plan.h).
  float* token_vectors = nullptr;
};

// A device's pool sizes of the three kinds of row (engine/kv/kv_manager.h
// places them): the bytes each takes, exactly as the device lays it out.
class RowSizer {
 public:
  virtual ~RowSizer() = default;
  // A row holding its own prompt (prompt_len positions) and the policy's decode slots.
  virtual int64_t RowBytes(int32_t prompt_len, const sparse::ResolvedPolicy& policy) const = 0;
  // A row reading another row's prompt KV: its decode slots only.
  virtual int64_t SharingRowBytes(int32_t prompt_len, const sparse::ResolvedPolicy& policy) const = 0;
  // A prompt row of this length storing its KV in `format`.
  virtual int64_t PromptRowBytes(int32_t prompt_len, sparse::KvFormat format) const = 0;
};

// The pool the KV manager places a device's rows in.
struct KvPool {
  int64_t bytes = 0;  // 0: unbounded
  // true: rows are byte ranges of one pool placed first fit (a row's
  // RowState::pool_offset is its start); false: the rows' bytes are counted
  // against `bytes` and the device allocates each row's storage itself.
  bool ranges = false;
  int32_t max_prompt_tokens = 0;
  int32_t max_l_dec = 0;  // the longest decode a row's policy may have
};

struct RowState;
struct RowTable;

class Backend : public RowSizer {
 public:
  ~Backend() override = default;

  virtual const ModelSpec& spec() const = 0;
  virtual std::string name() const = 0;  // "cpu", "cuda"

  // K+V bytes of one token position of one row, all layers (the KV element
  // width is the backend's: f32 on CPU, bf16 on CUDA).
  virtual int64_t KvBytesPerTokenRow() const = 0;
  // The pool's size in bytes (the KV budget).
  virtual int64_t PoolBytes() const = 0;
  // Rows per Prefill/Decode call (the batch cap), as sized.
  virtual int32_t MaxBatchRows() const = 0;
  // How the device's memory was split (one line for the start-up log); empty: nothing to say.
  virtual std::string MemorySizing() const { return {}; }

  // Row storage (see the contract). The KV manager owns the rows: it places
  // them and keeps their table; the backend stores what they hold.
  virtual KvPool Pool() const = 0;
  // The table Prefill and Decode find rows in (the KV manager's; it outlives
  // its use here, and is detached with nullptr).
  virtual void SetRowTable(const RowTable* rows) = 0;
  // A new row of the backend's kind (RowState's fields unset).
  virtual std::unique_ptr<RowState> NewRow() const = 0;
  // The manager placed `row` (RowState's fields set, pool_offset and
  // pool_bytes included); `prompt_source`: the row whose prompt KV it reads
  // (RowState::prompt_owner's), or nullptr. The backend sets up the row's
  // storage; an error undoes the placement.
  virtual absl::Status RowPlaced(RowState& row, const RowState* prompt_source) = 0;
  // The manager freed `row` (or hid it: an owner with sharers left). No work
  // of an earlier call may still use it once this returns.
  virtual void RowFreed(RowState& row) = 0;

  // One step of the plan's query tokens (the contract above). Errors:
  // InvalidArgument naming the plan's field (engine/model/step_checks.h),
  // with no state changed.
  virtual absl::Status Forward(const StepPlan& plan, const StepOutputs& out) = 0;
  // Whether Forward runs rewinding plans (StepPlan::rewinds: speculative
  // decoding) and returns every output point's row logits with them; a
  // backend that does not refuses such a plan with UNIMPLEMENTED.
  virtual bool SupportsRewind() const { return false; }

  // Forward for whole prompts of newly allocated rows / one decode token per
  // row; their batch errors name PrefillBatch / DecodeBatch fields.
  absl::Status Prefill(const PrefillBatch& batch, const StepOutputs& out);
  absl::Status Decode(const DecodeBatch& batch, const StepOutputs& out);

  // The live row of an id, or nullptr, and the batch limits (for the shared
  // batch checks, engine/model/batch_checks.h).
  virtual RowState* FindLiveRow(RowId id) = 0;
  virtual BatchLimits Limits() const = 0;
};

// A vector model (spec.output.token_dim > 0) comes with a token head whose
// widths match the spec; a code model with none (InvalidArgument otherwise).
absl::Status CheckTokenHead(const ModelSpec& spec, const TokenHead* head);

}  // namespace argen::model
