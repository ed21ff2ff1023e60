// Plain policy types shared by host and device code. No absl, no std
// containers: this header is included by CUDA kernels through policy.h.
#pragma once

#include <cstdint>

namespace argen::sparse {

enum class PolicyKind : int32_t {
  kDense = 0,
  kSlidingWindow = 1,
  kStreamingLlm = 2,
  kH2O = 3,
  kTova = 4,
  kAlisa = 5,
  kDiagonal = 6,
  kDiagonalSink4 = 7,
  kGridWindow = 8,    // the 2-D neighbourhood of the token being generated
  kDiagonalGrid = 9,  // Algorithm 1 started from, and windowed by, that neighbourhood
  kSsd = 10,          // head-classified: spatial heads a window, semantic heads top-M
  kLineEvict = 11,    // LineAR: anchors + recent lines, older keys evicted a line at a time by cross-line attention
};

// How a row's K/V are stored (the request's kv_cache_dtype).
enum class KvFormat : int32_t {
  kAuto = 0,     // the backend's own: bf16 on CUDA, f32 on the CPU
  kFp8E4m3 = 1,  // e4m3 codes with one fp32 scale per stored vector (kernels/kv_fp8.h)
};

// Parameters as requested. Zero/negative fields mean "derive the default".
struct PolicyParams {
  PolicyKind kind = PolicyKind::kDense;
  double sparsity = 0.0;  // fraction of decode KV NOT attended per step, in [0, 1)
  int32_t n_att = 0;      // decode keys attended per step; 0: round((1 - sparsity) * L_dec)
  int32_t n_recent = 0;   // diagonal's recent window N_r; 0: round(0.5 * L_dec)
                          // (grid_window: the current row's run; ssd: the spatial window W;
                          // line_evict: the recent positions kept whole, default one line)
  int32_t n_sink = -1;    // sink tokens; -1: the policy's default (4 for streaming_llm / diagonal_sink4,
                          // 0 for grid_window / diagonal_grid / line_evict, 1 for ssd: its anchor)
  KvFormat kv_format = KvFormat::kAuto;
};

// The image's token grid in decode order, as the model family lays it out:
// decode position t sits in row t / (width + row_break_tokens) and column
// t % (width + row_break_tokens); columns >= width are row-break tokens
// (Janus-Pro: 0 a row; Lumina-mGPT: 1, its rows are width + 1 tokens).
struct GridGeometry {
  int32_t width = 0;             // image tokens per row; 0: unknown
  int32_t row_break_tokens = 0;  // extra tokens closing each row
  int32_t l_dec = 0;             // decode tokens (image tokens, row breaks included)
  // The family's diagonal recent window N_r for requests that name none
  // (docs/policies.md "Per-family N_r"); 0: the paper's round(0.5 L_dec).
  int32_t default_n_recent = 0;
};

// A recent window of `rows_num / rows_den` image rows of this grid (row
// breaks included), rounded up: the families' default N_r.
inline int32_t RecentRowsWindow(const GridGeometry& grid, int32_t rows_num, int32_t rows_den) {
  const int64_t row = grid.width + grid.row_break_tokens;
  return static_cast<int32_t>((row * rows_num + rows_den - 1) / rows_den);
}

// ssd: the most (layer, kv head) pairs a classification may hold (a bit each
// in ResolvedPolicy, so the policy stays a plain value the device copies).
inline constexpr int32_t kMaxClassifiedHeads = 1024;

// Parameters after defaults are applied and validated for a given decode length.
// See docs/policies.md for what each field means per policy.
struct ResolvedPolicy {
  PolicyKind kind = PolicyKind::kDense;
  int32_t l_dec = 0;     // decode tokens whose KV may be kept (image tokens per image)
  int32_t n_att = 0;     // decode keys attended per step (upper bound)
  int32_t n_slots = 0;   // decode KV slots resident per row, the memory bound
  int32_t n_sink = 0;    // first decode tokens kept and always attended (streaming_llm, diagonal_sink4)
  int32_t n_recent = 0;  // diagonal*: recent window N_r (sinks included);
                         // h2o/alisa: most recent positions protected from eviction;
                         // grid_window: run a (tokens left of the target in its row);
                         // diagonal_grid: window N_r (sinks included); ssd: spatial window W;
                         // line_evict: most recent positions never evicted (the new one included)
  // grid_window, diagonal_grid, ssd, line_evict: the grid (GridGeometry) and the
  // neighbourhood's shape: a run of grid_run tokens left of the target in its
  // row, and bands of grid_band columns around the target's column in the rows
  // above (docs/policies.md).
  int32_t grid_width = 0;
  int32_t grid_period = 0;  // width + row_break_tokens
  int32_t grid_run = 0;
  int32_t grid_band = 0;
  // ssd: (layer, kv head) pairs classified (0: none; the engine refuses such
  // a policy) and their classes, bit layer * kv_heads + kv_head set = semantic.
  int32_t ssd_heads = 0;
  uint32_t ssd_semantic[kMaxClassifiedHeads / 32] = {};
  // Storage of the row's K/V (the prompt's and the decode slots'); which keys
  // are attended does not depend on it.
  KvFormat kv_format = KvFormat::kAuto;
};

}  // namespace argen::sparse
