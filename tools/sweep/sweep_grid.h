// The sweep's grid: which (policy, sparsity) configurations run, and the
// folder each one's images go to. Sparsities are given in percent, as the
// paper's Table 2 columns are (80, 90, 92.5, 95, 96).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/sparse/policy_params.h"

namespace argen::sweep {

inline constexpr std::string_view kDefaultPolicies =
    "dense,sliding_window,streaming_llm,h2o,tova,alisa,diagonal,diagonal_sink4";
inline constexpr std::string_view kDefaultSparsities = "80,90,92.5,95,96";

struct SweepConfig {
  sparse::PolicyKind kind = sparse::PolicyKind::kDense;
  std::string policy;  // canonical name, "_nr<N>" appended for a per-entry window ("diagonal_nr64")
  double sparsity_percent = 0;
  std::string label;     // "<policy>_<sparsity>", e.g. "diagonal_92.5": the folder name
  int32_t n_recent = 0;  // the entry's own n_recent ("diagonal:64"); 0: --n-recent / the default
  // The entry's own KV storage ("dense@fp8"); kAuto: the sweep-wide --kv-cache-dtype.
  sparse::KvFormat kv_format = sparse::KvFormat::kAuto;
  // --parallel-windows entry (GenerationRequest::parallel_window); > 0: "_pw<N>" ends the label.
  int32_t parallel_window = 0;
  // --speculative-windows entry (GenerationRequest::speculative_window); > 0: "_sw<N>" ends the label.
  int32_t speculative_window = 0;
};

// One --policies entry: "name" or "name:N" (N: that entry's n_recent, for the
// policies that read one, e.g. diagonal:64 next to diagonal at the default N_r),
// optionally with "@fp8" (that entry's KV in fp8, e.g. dense@fp8 next to dense:
// its images get PSNR against dense's, the bf16 KV twin). The folder names
// carry "_nr<N>" and "_fp8".
struct PolicySpec {
  sparse::PolicyKind kind = sparse::PolicyKind::kDense;
  int32_t n_recent = 0;
  sparse::KvFormat kv_format = sparse::KvFormat::kAuto;
  bool operator==(const PolicySpec&) const = default;
};

// Whether --n-recent applies to a policy: the diagonal ones (diagonal, diagonal_sink4).
bool UsesNRecent(sparse::PolicyKind kind);

// "a,b,c" -> canonical policy kinds, in order, without duplicates.
absl::StatusOr<std::vector<sparse::PolicyKind>> ParsePolicies(std::string_view csv);
// "a,b:64,c@fp8" -> entries in order, without duplicates; an entry's ":N" must
// be >= 1 and is only allowed for a policy that reads n_recent; "@" takes a
// kv_cache_dtype name other than auto.
absl::StatusOr<std::vector<PolicySpec>> ParsePolicySpecs(std::string_view csv);

// "80,92.5" -> percents in [0, 100), in order, without duplicates.
absl::StatusOr<std::vector<double>> ParseSparsities(std::string_view csv);

// 92.5 -> "92.5", 80 -> "80" (shortest exact form, no trailing zeros).
std::string FormatPercent(double percent);

// Dense runs once (at 0, whatever the sparsities); every other policy runs at
// every sparsity (0 included if asked: a sparse policy at 0 equals dense).
std::vector<SweepConfig> BuildGrid(const std::vector<sparse::PolicyKind>& policies,
                                   const std::vector<double>& sparsities);
std::vector<SweepConfig> BuildGrid(const std::vector<PolicySpec>& policies, const std::vector<double>& sparsities);
// Every configuration above at every parallel window (0 keeps its label).
std::vector<SweepConfig> BuildGrid(const std::vector<PolicySpec>& policies, const std::vector<double>& sparsities,
                                   const std::vector<int32_t>& parallel_windows);

// Every configuration above at every parallel window, then at every
// speculative window > 0 (without parallel decoding: the two do not combine).
std::vector<SweepConfig> BuildGrid(const std::vector<PolicySpec>& policies, const std::vector<double>& sparsities,
                                   const std::vector<int32_t>& parallel_windows,
                                   const std::vector<int32_t>& speculative_windows);

// "0,4,8" -> windows >= 0, in order, without duplicates; errors name `flag`.
absl::StatusOr<std::vector<int32_t>> ParseParallelWindows(std::string_view csv,
                                                          std::string_view flag = "--parallel-windows");

}  // namespace argen::sweep
