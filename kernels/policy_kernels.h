// The sparse policies of kernels/sparse/policy.h run on the device, one warp
// per (row, layer, kv_head) for planning (lane 0 updates the state, the lanes
// write the attended list) and one thread per (row, kv_head) for observing,
// over per-row flat state in two device pools. Same functions as the CPU.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/sparse/policy.h"

namespace argen::kernels {

// Per row of a decode step: its policy, layout, state location and step.
struct RowPlan {
  sparse::ResolvedPolicy policy;
  sparse::PolicyLayout layout;
  int64_t ints_offset = 0;    // first int of the row's state: [layer][kv_head][ints_per_head]
  int64_t floats_offset = 0;  // first float: [layer][kv_head][floats_per_head]
  int32_t step = 0;           // decode step t
  int32_t sparse = 0;         // 0: dense row (no plan: writes slot t, attends [0, t])
  // Parallel decoding (sparse::PlanQuery): the row's queries of the step are
  // out of order (a state that went out of order stays so on its own), and
  // whether this query writes its K/V (0: provisional).
  int32_t out_of_order = 0;
  int32_t writes = 1;
};

// Plan outputs, all [layer][row][kv_head](...):
//   write_slots, counts: ints; attended: ints of `stride` per (layer, row, kv_head).
struct PlanBuffers {
  int32_t* write_slots = nullptr;
  int32_t* counts = nullptr;
  int32_t* attended = nullptr;
  int32_t stride = 0;
};

// The part of a step's plan buffers a plan / observe / apply launch covers:
// rows [first_row, first_row + row_count) of the step's n_rows, and one layer
// or all. A pass whose rows carry several queries of one sparse row (parallel
// decoding) plans, attends and applies rank by rank inside each layer: a
// head's state is its layer's alone, so that is the same sequence of state
// updates as one pass per rank.
struct PlanScope {
  int32_t first_row = 0;
  int32_t row_count = -1;  // -1: every row from first_row
  int32_t layer = -1;      // -1: every layer (ObserveDecodeStep takes its layer apart)
};

// Initialises the state of `layers * kv_heads` heads of one row.
cudaError_t InitPolicyState(const sparse::ResolvedPolicy& policy, const sparse::PolicyLayout& layout,
                            int32_t heads_per_row, int32_t* ints, float* floats, cudaStream_t stream);

// sparse::PlanQuery for every (sparse row, layer, kv_head): PlanStep, or the
// out-of-order plan (its list compacted by the warp). A plan that fails (-1) gives count 0.
cudaError_t PlanDecodeStep(const RowPlan* rows, int32_t n_rows, int32_t layers, int32_t kv_heads, int32_t* state_ints,
                           float* state_floats, const PlanBuffers& out, cudaStream_t stream,
                           const PlanScope& scope = {});

// ObserveStep of layer `layer` for every (sparse row, kv_head) that needs it, with
// the attention probabilities probs[row][kv_head][probs_stride] of that layer.
// skip_diagonal: diagonal rows are left to ApplyDiagonalSelections.
cudaError_t ObserveDecodeStep(const RowPlan* rows, int32_t n_rows, int32_t layers, int32_t kv_heads, int32_t layer,
                              int32_t* state_ints, float* state_floats, const PlanBuffers& plan, const float* probs,
                              int32_t probs_stride, cudaStream_t stream, bool skip_diagonal = false,
                              const PlanScope& scope = {});

// The diagonal rows' observe of a whole step (all layers) from the attention
// kernel's argmin[layer][row][kv_head] (entries from sparse::DiagonalSelectionFirst,
// kernels/attention.h): sparse::ApplyDiagonalSelection per (diagonal row, layer,
// kv_head); other rows are untouched. Call after every layer's attention.
cudaError_t ApplyDiagonalSelections(const RowPlan* rows, int32_t n_rows, int32_t layers, int32_t kv_heads,
                                    int32_t* state_ints, float* state_floats, const PlanBuffers& plan,
                                    const int32_t* argmin, cudaStream_t stream, const PlanScope& scope = {});

}  // namespace argen::kernels
