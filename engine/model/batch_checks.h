// The per-row state every backend keeps (one struct: where a row is in its
// decode and whether it is prefilled) and the one validation of a Prefill or
// Decode batch against it (engine/model/backend.h contract), shared by the
// CPU and the CUDA backend. Everything is checked before any state changes;
// errors are InvalidArgument naming the field and index at fault.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/backend.h"
#include "kernels/sparse/policy.h"

namespace argen::model {

inline constexpr RowId kNoRow = -1;

// One row of the KV manager's table (engine/kv/kv_manager.h): the manager
// sets these fields and places the row; a backend's row derives from this and
// adds where its KV lives (Backend::NewRow / RowPlaced).
struct RowState {
  RowState() = default;
  RowState(const RowState&) = default;
  RowState& operator=(const RowState&) = default;
  virtual ~RowState() = default;

  int32_t prompt_len = 0;
  // Prompt-KV sharing (backend.h): the row whose prompt KV this one reads
  // (kNoRow: its own), how many rows read this one's, and whether freeing hid
  // it while some still do (its region lives until the last is freed).
  RowId prompt_owner = kNoRow;
  int32_t prompt_sharers = 0;
  bool released = false;
  // A prompt row (KvManager::AllocatePromptRow): it holds a prompt and decodes nothing;
  // once filled, its tokens (a sharer prefilled later must have the same).
  bool prompt_row = false;
  std::vector<int32_t> prompt_tokens;
  sparse::ResolvedPolicy policy;
  sparse::PolicyLayout layout;
  int32_t prompt_filled = 0;  // prompt positions written so far (chunked prefill, step_plan.h)
  int32_t next_step = 0;      // decode position t the next Decode must feed
  // Out-of-order decoding (step_plan.h, parallel decoding): per decode index,
  // whether its K/V is written; empty until the row first decodes out of
  // order. Every index < next_step is written; next_step is the lowest one not.
  std::vector<uint8_t> written;
  bool Written(int32_t t) const {
    return t < next_step || (t < static_cast<int32_t>(written.size()) && written[t] != 0);
  }
  bool prefilled = false;
  bool in_batch = false;  // scratch of batch validation (duplicate rows)
  // Where the manager placed it: its pool bytes (KvPool) and, in a pool of
  // ranges, the byte offset of its range.
  int64_t pool_offset = 0;
  int64_t pool_bytes = 0;
};

// The KV manager's table of rows, indexed by RowId (null where free); the
// backends find a batch's rows in it.
struct RowTable {
  std::vector<std::unique_ptr<RowState>> slots;
  // nullptr unless `id` is a live row; FindAny also finds hidden ones (freed
  // while sharers still read their prompt KV).
  RowState* FindAny(RowId id) const {
    return id < 0 || id >= static_cast<RowId>(slots.size()) ? nullptr : slots[id].get();
  }
  RowState* Find(RowId id) const {
    RowState* row = FindAny(id);
    return row == nullptr || row->released ? nullptr : row;
  }
};

// The row of an id, or nullptr when it is not a live row.
using RowLookup = std::function<RowState*(RowId)>;

struct BatchLimits {
  int32_t max_batch_rows = 0;
  int32_t text_vocab = 0;   // prefill token ids in [0, text_vocab)
  int32_t input_rows = 0;   // decode input ids in [0, input_rows)
  int32_t hidden_size = 0;  // a prompt embedding's width
  int32_t token_dim = 0;    // a token vector's width (vector models), else 0
};

// A row's arguments (KvManager::AllocateRow): prompt_len in [1, max_prompt_tokens], a resolved
// policy whose decode length is at most max_l_dec.
absl::Status CheckRowRequest(int32_t prompt_len, const sparse::ResolvedPolicy& policy, int32_t max_prompt_tokens,
                             int32_t max_l_dec);

// On success `rows` holds every batch entry's row, in batch order (Prefill:
// the rows, then the prompt rows).
// Every pair's sampling spec in range; errors name "<call>: sampling[i].<field>".
absl::Status CheckSampling(const char* call, std::span<const SamplingSpec> sampling);

absl::Status CheckPrefillBatch(const PrefillBatch& batch, const StepOutputs& out, const BatchLimits& limits,
                               const RowLookup& lookup, std::vector<RowState*>* rows);
absl::Status CheckDecodeBatch(const DecodeBatch& batch, const StepOutputs& out, const BatchLimits& limits,
                              const RowLookup& lookup, std::vector<RowState*>* rows);

// What a prefill computes under prompt-KV sharing (backend.h): only the rows
// and prompt rows that hold their prompt. A sharing row's logits come from
// its owner's last position: an owner in the call (a row or a prompt row) with
// the same tokens, or a prompt row filled by an earlier call (`cached`), whose
// tokens it must equal. The last positions a call samples from ("sources")
// are the computed entries, then the cached prompt rows' stored ones.
struct PrefillPlan {
  std::vector<int32_t> computed;        // entry of each computed row (rows, then prompt rows), in that order
  std::vector<int32_t> offsets;         // computed.size() + 1 offsets into tokens
  std::vector<int32_t> tokens;          // the computed rows' prompts, concatenated
  std::vector<const RowState*> cached;  // prompt rows filled before: source computed.size() + i
  std::vector<int32_t> logits_row;      // per batch row (rows only): the source giving its logits
  // Whether row r's source is computed entry r for every row (no gather needed).
  bool identity = true;
};
// `any_row` finds a row by id, hidden (freed with sharers left) ones included.
absl::Status PlanPrefill(const PrefillBatch& batch, std::span<RowState* const> rows,
                         const std::function<const RowState*(RowId)>& any_row, PrefillPlan* plan);

// The state changes of a completed call (a prompt row keeps its tokens).
void MarkPrefilled(const PrefillBatch& batch, std::span<RowState* const> rows);
void AdvanceStep(std::span<RowState* const> rows);

}  // namespace argen::model
