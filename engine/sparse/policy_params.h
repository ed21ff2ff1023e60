// Sparsity policy selection and parameters, as a request states them.
// Shared by the scheduler (admission needs the KV bound) and every backend.
// The plain types live in policy_types.h (device-safe); this header adds the
// host-side parsing and validation.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/sparse/policy_types.h"

namespace argen::sparse {

// Canonical names: dense, sliding_window, streaming_llm, h2o, tova, alisa,
// diagonal, diagonal_sink4 (ParsePolicyName also accepts a few aliases).
std::string_view PolicyName(PolicyKind kind);
absl::StatusOr<PolicyKind> ParsePolicyName(std::string_view name);

// Applies defaults and validates; the error message names the bad field.
absl::StatusOr<ResolvedPolicy> ResolvePolicy(const PolicyParams& params, int32_t l_dec);

}  // namespace argen::sparse
