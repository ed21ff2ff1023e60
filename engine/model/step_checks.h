// The one validation of a StepPlan (engine/model/step_plan.h) against the
// rows' state, shared by every backend, and what a valid plan means for each
// row and pair (which rows complete their prompt, where each pair's outputs
// go). Everything is checked before any state changes; errors are
// InvalidArgument naming the field and index at fault.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "engine/model/backend.h"
#include "engine/model/batch_checks.h"
#include "engine/model/step_plan.h"

namespace argen::model {

// What CheckStepPlan derives from a valid plan. Entries are the plan's rows,
// then its prompt rows.
struct PlannedStep {
  std::vector<RowState*> rows;  // per entry
  // Per entry: the kind of its queries (none: a sharing row completing with
  // its owner) and whether the step completes the row's prompt.
  std::vector<QueryKind> kind;
  std::vector<uint8_t> has_queries;
  std::vector<uint8_t> completes_prompt;
  // Per entry: whether its prompt queries are computed (a sharing row's copy
  // of its owner's prompt is not: it reads the owner's KV).
  std::vector<uint8_t> computes_prompt;
  // Per entry completing its prompt: the entry whose last prompt position
  // gives its logits (itself, or its owner in this step), or -1 - k for
  // cached prompt row k (filled by an earlier step: `cached`).
  std::vector<int32_t> prompt_source;
  std::vector<const RowState*> cached;
  // Per pair: [output_offsets[i], output_offsets[i + 1]) into StepOutputs::sampled.
  std::vector<int32_t> output_offsets;
  // Per entry: whether its decode queries are in order (consecutive from the
  // row's next step, none provisional, nothing written beyond it): the
  // policy's sequential PlanStep applies. all_in_order: every entry's are.
  std::vector<uint8_t> in_order;
  bool all_in_order = true;
  // Per entry: the decode index a rewinding row starts at (StepPlan::rewinds;
  // below its next step: the backend drops its K/V from there before the
  // step), or -1.
  std::vector<int32_t> rewind_to;
  int32_t outputs = 0;
  int32_t prompt_queries = 0, decode_queries = 0;  // computed ones
};

// Whether a row of this policy may decode out of order (step_plan.h): dense,
// sliding_window, streaming_llm, diagonal, diagonal_sink4 (sparse::PlansOutOfOrder).
bool SupportsOutOfOrder(const sparse::ResolvedPolicy& policy);
// Whether it may rewind (StepPlan::rewinds): dense only.
bool SupportsRewind(const sparse::ResolvedPolicy& policy);

// `any_row` finds a row by id, hidden (freed with sharers left) ones included.
absl::Status CheckStepPlan(const StepPlan& plan, const StepOutputs& out, const BatchLimits& limits,
                           const RowLookup& lookup, const std::function<const RowState*(RowId)>& any_row,
                           PlannedStep* step);

// The rows' state after the step ran: prompt positions filled, prefilled,
// next decode index; a prompt row keeps its tokens.
void CommitStep(const StepPlan& plan, const PlannedStep& step);

// The plan of one whole-prompt prefill call and of one decode call (one
// query per row), as the Prefill / Decode conveniences of model::Backend make
// them.
void PlanOfPrefill(const PrefillBatch& batch, StepPlanBuilder* builder);
void PlanOfDecode(const DecodeBatch& batch, StepPlanBuilder* builder);

}  // namespace argen::model
