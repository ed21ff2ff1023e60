#include "engine/sparse/policy_params.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace argen::sparse {
namespace {

struct NamedKind {
  std::string_view name;
  PolicyKind kind;
};

// Canonical names first; the rest are aliases (the paper artifact's spellings).
constexpr NamedKind kNames[] = {
    {"dense", PolicyKind::kDense},
    {"sliding_window", PolicyKind::kSlidingWindow},
    {"streaming_llm", PolicyKind::kStreamingLlm},
    {"h2o", PolicyKind::kH2O},
    {"tova", PolicyKind::kTova},
    {"alisa", PolicyKind::kAlisa},
    {"diagonal", PolicyKind::kDiagonal},
    {"diagonal_sink4", PolicyKind::kDiagonalSink4},
    {"window", PolicyKind::kSlidingWindow},
    {"slidingwindow", PolicyKind::kSlidingWindow},
    {"streamingllm", PolicyKind::kStreamingLlm},
    {"diagonal+sink4", PolicyKind::kDiagonalSink4},
};

absl::Status Invalid(PolicyKind kind, std::string_view field, std::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("sparsity policy ", std::string(PolicyName(kind)), ": ",
                                                 std::string(field), " ", std::string(why)));
}

bool UsesSinks(PolicyKind k) {
  return k == PolicyKind::kStreamingLlm || k == PolicyKind::kDiagonalSink4;
}
bool UsesRecent(PolicyKind k) {
  return k == PolicyKind::kDiagonal || k == PolicyKind::kDiagonalSink4 || k == PolicyKind::kH2O ||
         k == PolicyKind::kAlisa;
}

}  // namespace

std::string_view PolicyName(PolicyKind kind) {
  for (const NamedKind& n : kNames) {
    if (n.kind == kind) return n.name;
  }
  return "unknown";
}

absl::StatusOr<PolicyKind> ParsePolicyName(std::string_view name) {
  const std::string lower = absl::AsciiStrToLower(std::string(name));
  for (const NamedKind& n : kNames) {
    if (n.name == lower) return n.kind;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown sparsity policy \"", std::string(name),
      "\"; expected one of dense, sliding_window, streaming_llm, h2o, tova, alisa, diagonal, "
      "diagonal_sink4"));
}

absl::StatusOr<ResolvedPolicy> ResolvePolicy(const PolicyParams& params, int32_t l_dec) {
  const PolicyKind kind = params.kind;
  if (PolicyName(kind) == "unknown") {
    return absl::InvalidArgumentError(
        absl::StrCat("sparsity policy kind ", static_cast<int32_t>(kind), " is not known"));
  }
  if (l_dec < 1) return Invalid(kind, "l_dec (decode length)", absl::StrCat("must be >= 1, got ", l_dec));
  if (!(params.sparsity >= 0.0 && params.sparsity < 1.0)) {
    return Invalid(kind, "sparsity", absl::StrCat("must be in [0, 1), got ", params.sparsity));
  }
  if (params.n_att < 0) return Invalid(kind, "n_att", absl::StrCat("must be >= 0, got ", params.n_att));
  if (params.n_recent < 0) {
    return Invalid(kind, "n_recent", absl::StrCat("must be >= 0, got ", params.n_recent));
  }
  if (params.n_sink < -1) {
    return Invalid(kind, "n_sink", absl::StrCat("must be >= 0 (or -1 for the default), got ", params.n_sink));
  }
  if (params.n_att > 0 && params.sparsity != 0.0) {
    return Invalid(kind, "n_att", "and sparsity both set; give one of them");
  }

  ResolvedPolicy r;
  r.kind = kind;
  r.l_dec = l_dec;
  r.n_att = params.n_att > 0 ? params.n_att
                             : static_cast<int32_t>(std::lround((1.0 - params.sparsity) * l_dec));
  if (r.n_att < 1) {
    return Invalid(kind, "sparsity", absl::StrCat(params.sparsity, " leaves no decode key to attend (L_dec ",
                                                  l_dec, ")"));
  }
  if (r.n_att > l_dec) {
    return Invalid(kind, "n_att", absl::StrCat("must be <= L_dec ", l_dec, ", got ", r.n_att));
  }

  // Sinks.
  if (UsesSinks(kind)) {
    r.n_sink = params.n_sink >= 0 ? params.n_sink : 4;
    if (r.n_sink >= r.n_att) {
      return Invalid(kind, "n_sink", absl::StrCat("(", r.n_sink, ") must be < n_att (", r.n_att,
                                                  "): at least one recent slot is needed"));
    }
  } else if (params.n_sink > 0) {
    return Invalid(kind, "n_sink", "is only used by streaming_llm and diagonal_sink4");
  }
  if (!UsesRecent(kind) && params.n_recent > 0) {
    return Invalid(kind, "n_recent", "is only used by diagonal, diagonal_sink4, h2o and alisa");
  }

  switch (kind) {
    case PolicyKind::kDense:
      if (params.sparsity != 0.0 || (params.n_att != 0 && params.n_att != l_dec)) {
        return Invalid(kind, "sparsity", "must be 0: dense attends every decode token");
      }
      r.n_att = l_dec;
      r.n_slots = l_dec;
      break;
    case PolicyKind::kSlidingWindow:
    case PolicyKind::kStreamingLlm:
      r.n_slots = r.n_att;
      break;
    case PolicyKind::kH2O:
    case PolicyKind::kAlisa:
      // Half the budget is the protected recent window, half heavy hitters.
      r.n_recent = params.n_recent > 0 ? params.n_recent : r.n_att - r.n_att / 2;
      if (r.n_recent > r.n_att) {
        return Invalid(kind, "n_recent", absl::StrCat("(", r.n_recent, ") must be <= n_att (", r.n_att, ")"));
      }
      r.n_slots = r.n_att;
      break;
    case PolicyKind::kTova:
      r.n_slots = r.n_att;
      break;
    case PolicyKind::kDiagonal:
    case PolicyKind::kDiagonalSink4: {
      if (params.n_recent > 0) {
        r.n_recent = params.n_recent;
        if (r.n_recent > l_dec) {
          return Invalid(kind, "n_recent", absl::StrCat("(", r.n_recent, ") must be <= L_dec (", l_dec, ")"));
        }
        if (r.n_att > r.n_recent) {
          return Invalid(kind, "n_att", absl::StrCat("(", r.n_att, ") must be <= n_recent (", r.n_recent,
                                                     "): the attended keys come from the recent window"));
        }
      } else {
        // N_r = 0.5 x L_dec, widened to n_att when the budget is larger
        // (so sparsity 0 is exactly dense).
        r.n_recent = std::max(static_cast<int32_t>(std::lround(0.5 * l_dec)), r.n_att);
      }
      if (r.n_recent <= r.n_sink) {
        return Invalid(kind, "n_recent", absl::StrCat("(", r.n_recent, ") must be > n_sink (", r.n_sink, ")"));
      }
      r.n_slots = r.n_recent;
      break;
    }
  }
  return r;
}

}  // namespace argen::sparse
