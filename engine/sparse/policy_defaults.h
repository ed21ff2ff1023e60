// How a request's policy fields combine with a server's default policy (the
// policy rule of docs/serving.md), next to the policies it is about rather
// than in the transport.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/sparse/policy_types.h"

namespace argen::sparse {

// What a request states about its policy; unset fields take the defaults.
struct PolicyRequest {
  std::string name;  // empty: the default policy
  std::optional<double> sparsity;
  std::optional<int32_t> n_att, n_recent, n_sink;
};

// The rule: an empty name takes `defaults` with all its parameters; a named
// policy other than the default takes defaults.sparsity (sparse policies only;
// dense is always 0) and its own defaults for n_att / n_recent / n_sink.
// Fields the request sets win; n_att > 0 without sparsity replaces the default
// sparsity. A recent window inherited from `defaults` that is narrower than
// the request's N_att falls back to the policy's own default window (0.5 x
// L_dec, at least N_att; judged on the model's `grid`) rather than failing the request; a window the
// request sets itself is kept as given. An unknown name fails here
// (INVALID_ARGUMENT naming policy.name), and so does a sparse policy
// named without its budget (neither sparsity nor n_att; n_recent or n_sink
// alone do not count) when the default lends none (a dense default, or one
// with sparsity 0 and no n_att), which would run dense under a sparse name
// (INVALID_ARGUMENT naming policy.sparsity). Ranges are ResolvePolicy's.
absl::StatusOr<PolicyParams> ApplyPolicyDefaults(const PolicyRequest& request, const PolicyParams& defaults,
                                                 const GridGeometry& grid);

}  // namespace argen::sparse
