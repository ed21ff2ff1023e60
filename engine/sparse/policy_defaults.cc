#include "engine/sparse/policy_defaults.h"

#include "absl/strings/str_cat.h"
#include "engine/sparse/policy_params.h"

namespace argen::sparse {

absl::StatusOr<PolicyParams> ApplyPolicyDefaults(const PolicyRequest& request, const PolicyParams& defaults,
                                                 const GridGeometry& grid) {
  PolicyParams out = defaults;
  if (!request.name.empty()) {
    absl::StatusOr<PolicyKind> kind = ParsePolicyName(request.name);
    if (!kind.ok()) return absl::InvalidArgumentError(absl::StrCat("policy.name: ", kind.status().message()));
    if (*kind != defaults.kind) {
      out = PolicyParams{};
      out.kind = *kind;
      if (*kind != PolicyKind::kDense) out.sparsity = defaults.sparsity;
    }
  }
  if (out.kind == PolicyKind::kDense) out.sparsity = 0;
  // A sparse policy named without its budget (neither sparsity nor n_att)
  // that would inherit none (the default is dense, or lends no sparsity) would
  // attend every decode key: ask for one instead. A window or sink size alone
  // (--n_recent 64) does not set the budget: N_att would be all of L_dec.
  if (!request.name.empty() && out.kind != PolicyKind::kDense && !request.sparsity && !request.n_att &&
      out.sparsity == 0 && out.n_att == 0) {
    const std::string name(PolicyName(out.kind));
    return absl::InvalidArgumentError(absl::StrCat(
        "policy.sparsity: ", name, " is a sparse policy and the request names no sparsity (the default policy, ",
        std::string(PolicyName(defaults.kind)), ", has none to lend); set policy.sparsity in (0, 1) or policy.n_att, ",
        "e.g. --policy ", name, ":0.9 in argen_client (docs/quality.md rates each setting)"));
  }
  if (request.sparsity) out.sparsity = *request.sparsity;
  if (request.n_att) {
    out.n_att = *request.n_att;
    if (*request.n_att > 0 && !request.sparsity) out.sparsity = 0;  // n_att replaces the default sparsity
  }
  if (request.n_recent) out.n_recent = *request.n_recent;
  if (request.n_sink) out.n_sink = *request.n_sink;
  // A default window (e.g. n_recent 64) narrower than this request's N_att
  // (sparsity 0.8 -> N_att 115) must not make an otherwise valid request invalid.
  if (!request.n_recent && out.n_recent > 0 && out.kind == defaults.kind && !ResolvePolicy(out, grid).ok()) {
    PolicyParams widened = out;
    widened.n_recent = 0;
    if (ResolvePolicy(widened, grid).ok()) out = widened;
  }
  return out;
}

}  // namespace argen::sparse
