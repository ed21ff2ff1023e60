#include "kernels/policy_kernels.h"

namespace argen::kernels {
namespace {

constexpr int kThreads = 128;

// A launch's resolved scope: rows [first, first + count) of the step's n_rows
// and layers [first_layer, first_layer + layer_count).
struct Scope {
  int first = 0, count = 0, first_layer = 0, layer_count = 0;
};

// False for a scope outside the step (rows past n_rows, a layer past `layers`).
bool Resolve(const PlanScope& s, int n_rows, int layers, Scope* r) {
  r->first = s.first_row;
  r->count = s.row_count < 0 ? n_rows - s.first_row : s.row_count;
  r->first_layer = s.layer < 0 ? 0 : s.layer;
  r->layer_count = s.layer < 0 ? layers : 1;
  return r->first >= 0 && r->count >= 0 && r->first + r->count <= n_rows && s.layer < layers;
}

__device__ sparse::PolicyState StateOf(const RowPlan& r, int head, int32_t* ints, float* floats) {
  sparse::PolicyState s;
  s.ints = ints + r.ints_offset + static_cast<int64_t>(head) * r.layout.ints_per_head;
  s.floats = floats + r.floats_offset + static_cast<int64_t>(head) * r.layout.floats_per_head;
  return s;
}

__global__ void InitKernel(sparse::ResolvedPolicy policy, sparse::PolicyLayout layout, int heads, int32_t* ints,
                           float* floats) {
  const int h = blockIdx.x * blockDim.x + threadIdx.x;
  if (h >= heads) return;
  sparse::PolicyState s{ints + static_cast<int64_t>(h) * layout.ints_per_head,
                        floats + static_cast<int64_t>(h) * layout.floats_per_head};
  sparse::InitState(policy, layout, s, h);  // h = layer * kv_heads + kv_head
}

// One warp per (row, layer, kv_head): lane 0 advances the state
// (sparse::PlanStepState), then the lanes write the attended list together
// (sparse::AttendedSlot, coalesced), the same list sparse::PlanStep writes.
// Out of order (sparse::PlanQuery's choice): lane 0 runs
// sparse::PlanOutOfOrderState, then the lanes test 32 candidates at a time
// (sparse::OutOfOrderCandidate) and write the attended ones in candidate
// order (a ballot's prefix count): sparse::PlanOutOfOrderQuery's list.
__global__ void PlanKernel(const RowPlan* rows, int n_rows, Scope sc, int kv_heads, int32_t* ints, float* floats,
                           PlanBuffers out) {
  const int64_t i = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (i >= static_cast<int64_t>(sc.count) * sc.layer_count * kv_heads) return;  // uniform per warp
  const int g = static_cast<int>(i % kv_heads);
  const int layer = sc.first_layer + static_cast<int>((i / kv_heads) % sc.layer_count);
  const int row = sc.first + static_cast<int>(i / (kv_heads * sc.layer_count));
  const RowPlan& r = rows[row];
  if (!r.sparse) return;
  const int64_t at = (static_cast<int64_t>(layer) * n_rows + row) * kv_heads + g;
  const sparse::PolicyState s = StateOf(r, layer * kv_heads + g, ints, floats);
  int32_t slot = -1, n = 0, out_of_order = 0;
  if (lane == 0) {
    out_of_order = r.out_of_order || sparse::PlannedOutOfOrder(r.policy, s) ? 1 : 0;
    n = out_of_order ? sparse::PlanOutOfOrderState(r.policy, r.layout, s, r.step, r.writes != 0, &slot)
                     : sparse::PlanStepState(r.policy, r.layout, s, r.step, &slot);
  }
  n = __shfl_sync(0xffffffffu, n, 0);
  out_of_order = __shfl_sync(0xffffffffu, out_of_order, 0);
  __syncwarp();  // lane 0's state writes are visible to the warp
  int32_t* attended = out.attended + at * out.stride;
  if (!out_of_order) {
    for (int k = lane; k < n; k += 32) attended[k] = sparse::AttendedSlot(r.policy, r.layout, s, r.step, k);
  } else if (n >= 0) {
    const int32_t candidates = sparse::OutOfOrderCandidates(r.policy, s);
    n = 0;
    for (int32_t base = 0; base < candidates; base += 32) {  // uniform per warp
      const int32_t k = base + lane;
      const int32_t kept = k < candidates ? sparse::OutOfOrderCandidate(r.policy, r.layout, s, r.step, k) : -1;
      const unsigned taken = __ballot_sync(0xffffffffu, kept >= 0);
      if (kept >= 0) attended[n + __popc(taken & ((1u << lane) - 1u))] = kept;
      n += __popc(taken);
    }
  }
  if (lane == 0) {
    out.counts[at] = n < 0 ? 0 : n;
    out.write_slots[at] = n < 0 ? -1 : slot;
  }
}

// Diagonal / diagonal_grid rows whose selection the attention kernel's argmin made: one thread
// per (row, layer, kv_head) applies it (sparse::ApplyDiagonalSelection).
__global__ void ApplyKernel(const RowPlan* rows, int n_rows, Scope sc, int kv_heads, int32_t* ints, float* floats,
                            PlanBuffers plan, const int32_t* argmin) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= static_cast<int64_t>(sc.count) * sc.layer_count * kv_heads) return;
  const int g = static_cast<int>(i % kv_heads);
  const int layer = sc.first_layer + static_cast<int>((i / kv_heads) % sc.layer_count);
  const int row = sc.first + static_cast<int>(i / (kv_heads * sc.layer_count));
  const RowPlan& r = rows[row];
  if (!r.sparse || !sparse::SelectsByArgmin(r.policy.kind)) return;
  const int64_t at = (static_cast<int64_t>(layer) * n_rows + row) * kv_heads + g;
  // The list maps an out-of-order query's entry to its lag (sparse::ApplyDiagonalSelection).
  sparse::ApplyDiagonalSelection(r.policy, r.layout, StateOf(r, layer * kv_heads + g, ints, floats), r.step,
                                 plan.counts[at], argmin[at], plan.attended + at * plan.stride);
}

__global__ void ObserveKernel(const RowPlan* rows, int n_rows, Scope sc, int kv_heads, int layer, int32_t* ints,
                              float* floats, PlanBuffers plan, const float* probs, int probs_stride,
                              bool skip_diagonal) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= sc.count * kv_heads) return;
  const int g = i % kv_heads, row = sc.first + i / kv_heads;
  const RowPlan& r = rows[row];
  if (!r.sparse || (skip_diagonal && sparse::SelectsByArgmin(r.policy.kind))) return;
  sparse::PolicyState s = StateOf(r, layer * kv_heads + g, ints, floats);
  if (!sparse::ObserveNeeded(r.policy, r.layout, s, r.step)) return;
  const int64_t at = (static_cast<int64_t>(layer) * n_rows + row) * kv_heads + g;
  sparse::ObserveStep(r.policy, r.layout, s, r.step, plan.attended + at * plan.stride,
                      probs + (static_cast<int64_t>(row) * kv_heads + g) * probs_stride, plan.counts[at]);
}

int Blocks(int64_t n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

}  // namespace

cudaError_t InitPolicyState(const sparse::ResolvedPolicy& policy, const sparse::PolicyLayout& layout,
                            int32_t heads_per_row, int32_t* ints, float* floats, cudaStream_t stream) {
  if (heads_per_row <= 0) return cudaSuccess;
  InitKernel<<<Blocks(heads_per_row), kThreads, 0, stream>>>(policy, layout, heads_per_row, ints, floats);
  return cudaGetLastError();
}

cudaError_t PlanDecodeStep(const RowPlan* rows, int32_t n_rows, int32_t layers, int32_t kv_heads, int32_t* state_ints,
                           float* state_floats, const PlanBuffers& out, cudaStream_t stream, const PlanScope& scope) {
  Scope sc;
  if (!Resolve(scope, n_rows, layers, &sc)) return cudaErrorInvalidValue;
  const int64_t n = static_cast<int64_t>(sc.count) * sc.layer_count * kv_heads;
  if (n <= 0) return cudaSuccess;
  PlanKernel<<<Blocks(n * 32), kThreads, 0, stream>>>(rows, n_rows, sc, kv_heads, state_ints, state_floats, out);
  return cudaGetLastError();
}

cudaError_t ObserveDecodeStep(const RowPlan* rows, int32_t n_rows, int32_t layers, int32_t kv_heads, int32_t layer,
                              int32_t* state_ints, float* state_floats, const PlanBuffers& plan, const float* probs,
                              int32_t probs_stride, cudaStream_t stream, bool skip_diagonal, const PlanScope& scope) {
  Scope sc;
  if (!Resolve(scope, n_rows, layers, &sc) || layer < 0 || layer >= layers) return cudaErrorInvalidValue;
  const int64_t n = static_cast<int64_t>(sc.count) * kv_heads;
  if (n <= 0) return cudaSuccess;
  ObserveKernel<<<Blocks(n), kThreads, 0, stream>>>(rows, n_rows, sc, kv_heads, layer, state_ints, state_floats, plan,
                                                    probs, probs_stride, skip_diagonal);
  return cudaGetLastError();
}

cudaError_t ApplyDiagonalSelections(const RowPlan* rows, int32_t n_rows, int32_t layers, int32_t kv_heads,
                                    int32_t* state_ints, float* state_floats, const PlanBuffers& plan,
                                    const int32_t* argmin, cudaStream_t stream, const PlanScope& scope) {
  Scope sc;
  if (!Resolve(scope, n_rows, layers, &sc)) return cudaErrorInvalidValue;
  const int64_t n = static_cast<int64_t>(sc.count) * sc.layer_count * kv_heads;
  if (n <= 0) return cudaSuccess;
  ApplyKernel<<<Blocks(n), kThreads, 0, stream>>>(rows, n_rows, sc, kv_heads, state_ints, state_floats, plan, argmin);
  return cudaGetLastError();
}

}  // namespace argen::kernels
