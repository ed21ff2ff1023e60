#include "engine/sparse/policy_params.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/edit_distance.h"
#include "kernels/sparse/policy.h"

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
    {"grid_window", PolicyKind::kGridWindow},
    {"diagonal_grid", PolicyKind::kDiagonalGrid},
    {"ssd", PolicyKind::kSsd},
    {"line_evict", PolicyKind::kLineEvict},
    {"window", PolicyKind::kSlidingWindow},
    {"slidingwindow", PolicyKind::kSlidingWindow},
    {"streamingllm", PolicyKind::kStreamingLlm},
    {"diagonal+sink4", PolicyKind::kDiagonalSink4},
};

// A request field's error leads with it ("policy.<field>: why (policy
// name)"), so the server, the HTTP mapping (which turns the leading field into
// the JSON param) and the tools read the same message. Errors about no
// request field (the model's grid) name the policy first.
absl::Status Invalid(PolicyKind kind, std::string_view field, std::string_view why) {
  const bool request_field = field == "sparsity" || field == "n_att" || field == "n_recent" || field == "n_sink";
  if (request_field) {
    return absl::InvalidArgumentError(absl::StrCat("policy.", std::string(field), ": ", std::string(why), " (policy ",
                                                   std::string(PolicyName(kind)), ")"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("sparsity policy ", std::string(PolicyName(kind)), ": ", std::string(field), " ", std::string(why)));
}

bool IsGrid(PolicyKind k) { return k == PolicyKind::kGridWindow || k == PolicyKind::kDiagonalGrid; }
bool UsesSinks(PolicyKind k) {
  return k == PolicyKind::kStreamingLlm || k == PolicyKind::kDiagonalSink4 || IsGrid(k) || k == PolicyKind::kSsd ||
         k == PolicyKind::kLineEvict;
}
bool UsesRecent(PolicyKind k) {
  return k == PolicyKind::kDiagonal || k == PolicyKind::kDiagonalSink4 || k == PolicyKind::kH2O ||
         k == PolicyKind::kAlisa || IsGrid(k) || k == PolicyKind::kSsd || k == PolicyKind::kLineEvict;
}
// Whether a policy reads the model's token grid.
bool UsesGrid(PolicyKind k) { return IsGrid(k) || k == PolicyKind::kSsd || k == PolicyKind::kLineEvict; }
int32_t DefaultSinks(PolicyKind k) {
  // line_evict: the prompt is its anchor (always attended), no decode anchor.
  if (IsGrid(k) || k == PolicyKind::kLineEvict) return 0;
  if (k == PolicyKind::kSsd) return 1;  // the spatial heads' anchor: the first decode token
  return 4;
}

// The default neighbourhood for a budget of `budget` keys on a grid `width`
// wide: about as many rows as columns on each side (budget ~ 2 h^2), a run of
// h tokens and bands of 2h + 1 columns, h at most (width - 1) / 2.
int32_t DefaultHalfWidth(int32_t budget, int32_t width) {
  const int32_t h = static_cast<int32_t>(std::lround(std::sqrt(budget / 2.0)));
  return std::clamp(h, 0, (width - 1) / 2);
}

absl::Status ResolveGrid(PolicyKind kind, const GridGeometry& grid, ResolvedPolicy* r) {
  if (grid.width < 1) {
    return Invalid(kind, "grid width",
                   absl::StrCat("is unknown (", grid.width, "; L_dec ", grid.l_dec,
                                " is not a square grid): the model must state its token grid"));
  }
  if (grid.row_break_tokens < 0) {
    return Invalid(kind, "grid row_break_tokens", absl::StrCat("must be >= 0, got ", grid.row_break_tokens));
  }
  r->grid_width = grid.width;
  r->grid_period = grid.width + grid.row_break_tokens;
  return absl::OkStatus();
}

}  // namespace

std::string_view PolicyName(PolicyKind kind) {
  for (const NamedKind& n : kNames) {
    if (n.kind == kind) return n.name;
  }
  return "unknown";
}

std::string ClosestPolicyName(std::string_view name) {
  const std::string lower = absl::AsciiStrToLower(std::string(name));
  std::vector<std::string> names;
  for (const NamedKind& n : kNames) names.emplace_back(n.name);
  const std::string closest = ClosestName(lower, names);
  for (const NamedKind& n : kNames) {
    if (n.name == closest) return std::string(PolicyName(n.kind));  // the canonical name of an alias
  }
  return "";
}

absl::StatusOr<PolicyKind> ParsePolicyName(std::string_view name) {
  const std::string lower = absl::AsciiStrToLower(std::string(name));
  for (const NamedKind& n : kNames) {
    if (n.name == lower) return n.kind;
  }
  const std::string closest = ClosestPolicyName(name);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown sparsity policy \"", std::string(name).substr(0, 64), "\"",
                   closest.empty() ? "" : absl::StrCat(" (did you mean \"", closest, "\"?)"),
                   "; expected one of dense, sliding_window, streaming_llm, h2o, tova, alisa, diagonal, "
                   "diagonal_sink4, grid_window, diagonal_grid, ssd, line_evict"));
}

std::string_view KvFormatName(KvFormat format) {
  switch (format) {
    case KvFormat::kAuto:
      return "auto";
    case KvFormat::kFp8E4m3:
      return "fp8";
  }
  return "unknown";
}

absl::StatusOr<KvFormat> ParseKvFormat(std::string_view name) {
  const std::string lower = absl::AsciiStrToLower(std::string(name));
  if (lower.empty() || lower == "auto") return KvFormat::kAuto;
  if (lower == "fp8" || lower == "fp8_e4m3") return KvFormat::kFp8E4m3;
  return absl::InvalidArgumentError(
      absl::StrCat("kv_cache_dtype \"", std::string(name), "\" is not known; expected auto or fp8 (fp8_e4m3)"));
}

std::vector<std::string_view> PolicyParameterNames(PolicyKind kind) {
  if (kind == PolicyKind::kDense) return {};
  std::vector<std::string_view> names = {"sparsity", "n_att"};
  if (UsesRecent(kind)) names.push_back("n_recent");
  if (UsesSinks(kind)) names.push_back("n_sink");
  return names;
}

GridGeometry SquareGrid(int32_t l_dec) {
  GridGeometry g;
  g.l_dec = l_dec;
  const int32_t w = l_dec > 0 ? static_cast<int32_t>(std::lround(std::sqrt(static_cast<double>(l_dec)))) : 0;
  g.width = w * w == l_dec ? w : 0;
  return g;
}

absl::StatusOr<ResolvedPolicy> ResolvePolicy(const PolicyParams& params, int32_t l_dec) {
  return ResolvePolicy(params, SquareGrid(l_dec));
}

double MeanAttendedKeys(const ResolvedPolicy& policy) {
  if (policy.l_dec < 1) return 0;
  double semantic_share = 0;
  if (policy.kind == PolicyKind::kSsd && policy.ssd_heads > 0) {
    int32_t n = 0;
    for (int32_t h = 0; h < policy.ssd_heads; ++h) n += SsdHeadIsSemantic(policy, h) ? 1 : 0;
    semantic_share = static_cast<double>(n) / policy.ssd_heads;
  }
  double spatial = 0, semantic = 0;
  for (int32_t t = 0; t < policy.l_dec; ++t) {
    spatial += AttendedCount(policy, false, t);
    semantic += AttendedCount(policy, true, t);
  }
  return ((1 - semantic_share) * spatial + semantic_share * semantic) / policy.l_dec;
}

absl::StatusOr<ResolvedPolicy> ResolvePolicy(const PolicyParams& params, const GridGeometry& grid,
                                             const HeadClasses* ssd_heads) {
  const PolicyKind kind = params.kind;
  const int32_t l_dec = grid.l_dec;
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
    return Invalid(kind, "n_att", "set together with sparsity; give one of them");
  }

  if (KvFormatName(params.kv_format) == "unknown") {
    return absl::InvalidArgumentError(
        absl::StrCat("policy.kv_cache_dtype: format ", static_cast<int32_t>(params.kv_format), " is not known"));
  }

  ResolvedPolicy r;
  r.kind = kind;
  r.l_dec = l_dec;
  r.kv_format = params.kv_format;
  r.n_att = params.n_att > 0 ? params.n_att : static_cast<int32_t>(std::lround((1.0 - params.sparsity) * l_dec));
  if (r.n_att < 1) {
    return Invalid(kind, "sparsity",
                   absl::StrCat(params.sparsity, " leaves no decode key to attend (L_dec ", l_dec, ")"));
  }
  if (r.n_att > l_dec) {
    return Invalid(kind, "n_att", absl::StrCat("must be <= L_dec ", l_dec, ", got ", r.n_att));
  }

  // Sinks.
  if (UsesSinks(kind)) {
    r.n_sink = params.n_sink >= 0 ? params.n_sink : DefaultSinks(kind);
    if (r.n_sink >= r.n_att) {
      return Invalid(
          kind, "n_sink",
          absl::StrCat("(", r.n_sink, ") must be < n_att (", r.n_att, "): at least one recent slot is needed"));
    }
  } else if (params.n_sink > 0) {
    return Invalid(kind, "n_sink",
                   "is only used by streaming_llm, diagonal_sink4, grid_window, diagonal_grid, ssd and line_evict");
  }
  if (!UsesRecent(kind) && params.n_recent > 0) {
    return Invalid(kind, "n_recent",
                   "is only used by diagonal, diagonal_sink4, h2o, alisa, grid_window, diagonal_grid, ssd and "
                   "line_evict");
  }
  if (UsesGrid(kind)) {
    if (absl::Status s = ResolveGrid(kind, grid, &r); !s.ok()) return s;
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
          return Invalid(kind, "n_att",
                         absl::StrCat("(", r.n_att, ") must be <= n_recent (", r.n_recent,
                                      "): the attended keys come from the recent window"));
        }
      } else {
        // The family's N_r (else the paper's 0.5 x L_dec), widened to n_att
        // when the budget is larger (so sparsity 0 is exactly dense).
        const int32_t base = grid.default_n_recent > 0 ? std::min(grid.default_n_recent, l_dec)
                                                       : static_cast<int32_t>(std::lround(0.5 * l_dec));
        r.n_recent = std::max(base, r.n_att);
      }
      if (r.n_recent <= r.n_sink) {
        return Invalid(kind, "n_recent", absl::StrCat("(", r.n_recent, ") must be > n_sink (", r.n_sink, ")"));
      }
      r.n_slots = r.n_recent;
      break;
    }
    case PolicyKind::kGridWindow: {
      const int32_t budget = r.n_att - r.n_sink;
      int32_t h = DefaultHalfWidth(budget, r.grid_width);
      if (params.n_recent > 0) {
        h = params.n_recent;
        if (2 * h + 1 > r.grid_width) {
          return Invalid(kind, "n_recent",
                         absl::StrCat("(the current row's run, ", h, ") must be <= (width - 1) / 2 = ",
                                      (r.grid_width - 1) / 2, ": the bands are 2 n_recent + 1 columns"));
        }
      }
      r.grid_run = h;
      r.grid_band = 2 * h + 1;
      r.n_recent = h;
      // The ring holds the farthest lag a shape attends (about budget / band
      // rows up) and the recent window used before the shape fits.
      r.n_slots = std::min(l_dec, r.n_sink + std::max(budget, policy_detail::GridWindowMaxLag(r) + 1));
      break;
    }
    case PolicyKind::kDiagonalGrid: {
      const int32_t budget = r.n_att - r.n_sink;
      const int32_t h = DefaultHalfWidth(budget, r.grid_width);
      r.grid_run = h;
      r.grid_band = 2 * h + 1;
      if (params.n_recent > 0) {
        r.n_recent = params.n_recent;
        if (r.n_recent > l_dec) {
          return Invalid(kind, "n_recent", absl::StrCat("(", r.n_recent, ") must be <= L_dec (", l_dec, ")"));
        }
        if (r.n_att > r.n_recent) {
          return Invalid(kind, "n_att",
                         absl::StrCat("(", r.n_att, ") must be <= n_recent (", r.n_recent,
                                      "): the attended keys come from the window"));
        }
      } else {
        // The initial neighbourhood plus two more band rows.
        r.n_recent = std::min(l_dec, r.n_att + 2 * r.grid_band);
      }
      if (r.n_recent <= r.n_sink) {
        return Invalid(kind, "n_recent", absl::StrCat("(", r.n_recent, ") must be > n_sink (", r.n_sink, ")"));
      }
      r.n_slots = std::min(l_dec, r.n_sink + std::max(budget, policy_detail::GridLagMax(r, r.n_recent - r.n_sink) + 1));
      break;
    }
    case PolicyKind::kLineEvict: {
      // The budget holds the keys kept at a line start (anchors, the recent
      // window, at least one key chosen by the scores) plus the line the step
      // starts. n_recent defaults to one line (the row above the target),
      // shortened to what a smaller budget leaves.
      const int32_t line = r.grid_period;
      const int32_t room = r.n_att - line - r.n_sink - 1;
      r.n_recent = params.n_recent > 0 ? params.n_recent : std::clamp(room, 1, line);
      r.n_slots = r.n_att;
      const int32_t least = line + r.n_sink + r.n_recent + 1;
      if (r.n_att < least && r.n_att < l_dec) {  // (a budget of L_dec never evicts)
        const std::string_view field = params.n_recent > 0 ? "n_recent" : params.n_att > 0 ? "n_att" : "sparsity";
        return Invalid(kind, field,
                       absl::StrCat("leaves ", r.n_att, " keys; the budget must be >= one line (", line, ") + n_sink (",
                                    r.n_sink, ") + n_recent (", r.n_recent, ") + 1 scored key = ", least,
                                    " (a smaller n_recent lowers it)"));
      }
      break;
    }
    case PolicyKind::kSsd: {
      // Every head attends at most N_att keys: spatial heads the n_sink
      // anchor(s) + the last W, semantic heads M(t) <= N_att - 1 + the new one.
      const int32_t max_window = r.n_att - r.n_sink;
      r.n_recent = params.n_recent > 0 ? params.n_recent : max_window;
      if (r.n_recent > max_window) {
        return Invalid(
            kind, "n_recent",
            absl::StrCat("(the spatial window W, ", r.n_recent, ") must be <= n_att - n_sink (", max_window, ")"));
      }
      r.n_slots = r.n_att;
      if (ssd_heads != nullptr) {
        const int64_t n = int64_t{ssd_heads->layers} * ssd_heads->kv_heads;
        if (ssd_heads->layers < 1 || ssd_heads->kv_heads < 1 || n > kMaxClassifiedHeads ||
            static_cast<int64_t>(ssd_heads->semantic.size()) != n) {
          return Invalid(
              kind, "head classification",
              absl::StrCat("must hold layers x kv_heads classes (", ssd_heads->layers, " x ", ssd_heads->kv_heads,
                           ", at most ", kMaxClassifiedHeads, "), got ", ssd_heads->semantic.size()));
        }
        r.ssd_heads = static_cast<int32_t>(n);
        for (int32_t h = 0; h < r.ssd_heads; ++h) {
          if (ssd_heads->semantic[h] != 0) r.ssd_semantic[h >> 5] |= 1u << (h & 31);
        }
      }
      break;
    }
  }
  return r;
}

}  // namespace argen::sparse
