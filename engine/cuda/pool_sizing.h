// How the CUDA backend splits the card: its workspaces (sized by
// max_batch_rows) and the KV pool (kv_budget_bytes), either given or "auto"
// (0): the pool takes the device's free memory after the weights, the VQ
// decoder, the workspaces and a safety margin, and auto max_batch_rows is the
// most rows whose KV (at a reference row: a 50-token prompt with diagonal 95%,
// N_r 64 or N_att if larger, the sparse serving case) fits beside their workspaces. Host
// arithmetic only (tested on the host); CudaBackend allocates exactly these
// workspaces (WorkspaceBytes mirrors its Init).
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "engine/model/model_spec.h"
#include "kernels/sparse/policy_types.h"

namespace argen::cuda {

inline size_t AlignStaging(size_t n) { return (n + 255) / 256 * 256; }

// Offsets of the per-step inputs inside the staging area (host pinned and device).
struct StagingLayout {
  // Offsets; the query groups' (group_meta: [tokens] TokenMeta, group_members and
  // group_limits: [tokens] int32, kernels/query_groups.h) come last, so that a pass
  // without groups uploads only the bytes before group_meta.
  size_t meta, plans, ids, gather, sampling, observe, group_meta, group_members, group_limits, total;
  StagingLayout(int32_t tokens, int32_t rows);
};

// Rows auto sizing never goes beyond (the staging and plan indices are int32).
inline constexpr int32_t kMaxAutoBatchRows = 16384;

// Device bytes of the backend's fixed workspaces for `rows` rows per call and
// policies attending up to `plan_stride` decode keys (the rotary table, the
// activations of max(rows, 512) tokens, the head's rows, the step inputs, the
// policy plan buffers, the attention split-K workspace, with fp8 weights
// the fp8 GEMM inputs, and a vector model's token-vector buffers; its device
// flow head is placed before sizing, like the weights).
int64_t WorkspaceBytes(const model::ModelSpec& spec, int32_t rows, int32_t plan_stride, int32_t max_prompt_tokens,
                       int32_t sm_count, bool fp8_weights = false);

// The widest input of a layer projection (hidden, heads * head_dim or the
// intermediate size): what the fp8 GEMM inputs are reserved for.
int32_t WidestProjectionInput(const model::StackConfig& stack);

struct PoolSizingInput {
  int64_t free_bytes = 0;           // device memory free now (weights and VQ decoder already placed)
  int64_t total_bytes = 0;          // the card's memory
  int32_t max_batch_rows = 0;       // 0: auto
  int64_t kv_budget_bytes = 0;      // 0: auto
  int64_t reference_row_bytes = 0;  // pool bytes of the row auto rows are sized for (> 0 when rows are auto)
  int32_t plan_stride = 0;          // decode keys the plan buffers are made for
  int32_t max_prompt_tokens = 0;
  int32_t sm_count = 0;
  bool fp8_weights = false;  // weight_dtype fp8: the workspaces hold the fp8 GEMM inputs
};

struct PoolSizing {
  int32_t max_batch_rows = 0;
  int64_t workspace_bytes = 0;
  int64_t margin_bytes = 0;
  int64_t kv_budget_bytes = 0;
  bool auto_rows = false, auto_budget = false;
  // One line for the start-up log: what was free and how it was split.
  std::string Describe(int64_t free_bytes, int64_t total_bytes) const;
};

// Memory the sizing leaves unallocated for the CUDA context's lazy module
// loads, captured graphs, cuBLAS and allocation rounding: max(2 GiB, 3% of the card).
int64_t SafetyMargin(int64_t total_bytes);

// Pool bytes of the row auto max_batch_rows is sized for: a 50-token prompt
// with diagonal at 95% sparsity, N_r = max(min(64, L_dec / 2), N_att) (the
// smallest window that holds the 95% budget; dense where that policy does not
// resolve for a tiny L_dec).
// kv_format: the rows' storage (the server's default kv_cache_dtype).
// guidance_shared (share_prompt_kv_across_requests): the rows read their
// prompts from prompt rows and every image's guidance prompt is one shared
// row, so the reference is the mean row of such a pair: its decode slots plus
// half a 50-token prompt row (the caption's).
absl::StatusOr<int64_t> ReferenceRowBytes(const model::StackConfig& stack, int32_t decode_tokens,
                                          sparse::KvFormat kv_format = sparse::KvFormat::kAuto,
                                          bool guidance_shared = false);

// FAILED_PRECONDITION (with the figures) when the card cannot hold the
// workspaces of even one CFG pair, or an explicit setting does not fit.
absl::StatusOr<PoolSizing> SizePool(const model::ModelSpec& spec, const PoolSizingInput& in);

}  // namespace argen::cuda
