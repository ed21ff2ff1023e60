// Sparsity policy selection and parameters, as a request states them.
// Shared by the scheduler (admission needs the KV bound) and every backend.
// The plain types live in policy_types.h (device-safe); this header adds the
// host-side parsing and validation.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/sparse/policy_types.h"

namespace argen::sparse {

// Every policy, in the order `info` lists them.
inline constexpr PolicyKind kAllPolicyKinds[] = {
    PolicyKind::kDense,      PolicyKind::kSlidingWindow, PolicyKind::kStreamingLlm, PolicyKind::kH2O,
    PolicyKind::kTova,       PolicyKind::kAlisa,         PolicyKind::kDiagonal,     PolicyKind::kDiagonalSink4,
    PolicyKind::kGridWindow, PolicyKind::kDiagonalGrid,  PolicyKind::kSsd,          PolicyKind::kLineEvict,
};

// The known policy name nearest a misspelt one ("diagnoal" -> "diagonal"),
// for "did you mean"; "" when none is close.
std::string ClosestPolicyName(std::string_view name);

// Canonical names: dense, sliding_window, streaming_llm, h2o, tova, alisa,
// diagonal, diagonal_sink4, grid_window, diagonal_grid, ssd, line_evict (ParsePolicyName
// also accepts a few aliases).
std::string_view PolicyName(PolicyKind kind);
absl::StatusOr<PolicyKind> ParsePolicyName(std::string_view name);

// kv_cache_dtype names: "auto" and "fp8" (ParseKvFormat also takes "" for
// auto and "fp8_e4m3"); an unknown name is INVALID_ARGUMENT naming kv_cache_dtype.
std::string_view KvFormatName(KvFormat format);
absl::StatusOr<KvFormat> ParseKvFormat(std::string_view name);

// The PolicyParams fields a policy reads ("sparsity", "n_att", "n_recent", "n_sink").
std::vector<std::string_view> PolicyParameterNames(PolicyKind kind);

// ssd's offline head classification of a model: per (layer, kv head), 1 for
// a semantic head (top-M by accumulated attention), 0 for a spatial one
// (window + anchor). engine/sparse/ssd_heads.h reads and writes its file.
struct HeadClasses {
  int32_t layers = 0;
  int32_t kv_heads = 0;
  std::vector<uint8_t> semantic;  // [layer * kv_heads + kv_head]
};

// A grid of width round(sqrt(l_dec)) when l_dec is a perfect square (the
// Janus-Pro layout, no row breaks), else width 0 (unknown).
GridGeometry SquareGrid(int32_t l_dec);

// Applies defaults and validates; the error message names the bad field.
// The grid policies (grid_window, diagonal_grid), ssd and line_evict need
// the grid's width. ssd without `ssd_heads` is validated but unclassified (ssd_heads 0:
// every head would be spatial), which the engine refuses to run; with it,
// the classification must have at most kMaxClassifiedHeads heads.
absl::StatusOr<ResolvedPolicy> ResolvePolicy(const PolicyParams& params, const GridGeometry& grid,
                                             const HeadClasses* ssd_heads = nullptr);
// ResolvePolicy(params, SquareGrid(l_dec)).
absl::StatusOr<ResolvedPolicy> ResolvePolicy(const PolicyParams& params, int32_t l_dec);

// ssd: the mean attended decode keys per step and head over a whole image,
// from the per-step counts (AttendedCount) and the classification's share
// of semantic heads; other policies: the mean of min(t + 1, N_att).
double MeanAttendedKeys(const ResolvedPolicy& policy);

}  // namespace argen::sparse
