#include "tools/sweep/sweep_grid.h"

#include <algorithm>
#include <cstdio>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "engine/sparse/policy_params.h"

namespace argen::sweep {
namespace {

// (This absl's string_view is its own type, so the pieces are std::strings.)
std::vector<std::string> Items(std::string_view csv) {
  std::vector<std::string> items;
  for (absl::string_view item : absl::StrSplit(absl::string_view(csv.data(), csv.size()), ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (!item.empty()) items.emplace_back(item);
  }
  return items;
}

}  // namespace

bool UsesNRecent(sparse::PolicyKind kind) {
  return kind == sparse::PolicyKind::kDiagonal || kind == sparse::PolicyKind::kDiagonalSink4;
}

absl::StatusOr<std::vector<sparse::PolicyKind>> ParsePolicies(std::string_view csv) {
  std::vector<sparse::PolicyKind> kinds;
  for (const std::string& item : Items(csv)) {
    absl::StatusOr<sparse::PolicyKind> kind = sparse::ParsePolicyName(item);
    if (!kind.ok()) return absl::InvalidArgumentError(absl::StrCat("--policies: ", kind.status().message()));
    if (std::find(kinds.begin(), kinds.end(), *kind) == kinds.end()) kinds.push_back(*kind);
  }
  if (kinds.empty()) return absl::InvalidArgumentError("--policies: no policy given");
  return kinds;
}

absl::StatusOr<std::vector<PolicySpec>> ParsePolicySpecs(std::string_view csv) {
  std::vector<PolicySpec> specs;
  for (const std::string& item : Items(csv)) {
    PolicySpec spec;
    std::string entry = item;
    if (const size_t at = item.find('@'); at != std::string::npos) {
      entry = item.substr(0, at);
      absl::StatusOr<sparse::KvFormat> format = sparse::ParseKvFormat(item.substr(at + 1));
      if (!format.ok() || *format == sparse::KvFormat::kAuto) {
        return absl::InvalidArgumentError(
            absl::StrCat("--policies: \"", item, "\": after the @ comes a kv_cache_dtype other than auto (fp8)"));
      }
      spec.kv_format = *format;
    }
    std::string name = entry;
    if (const size_t colon = entry.find(':'); colon != std::string::npos) {
      name = entry.substr(0, colon);
      const std::string window = entry.substr(colon + 1);
      if (!absl::SimpleAtoi(window, &spec.n_recent) || spec.n_recent < 1) {
        return absl::InvalidArgumentError(
            absl::StrCat("--policies: \"", item, "\": after the colon comes n_recent, a whole number >= 1"));
      }
    }
    absl::StatusOr<sparse::PolicyKind> kind = sparse::ParsePolicyName(name);
    if (!kind.ok()) return absl::InvalidArgumentError(absl::StrCat("--policies: ", kind.status().message()));
    spec.kind = *kind;
    if (spec.n_recent > 0) {
      const std::vector<std::string_view> fields = sparse::PolicyParameterNames(spec.kind);
      if (std::find(fields.begin(), fields.end(), "n_recent") == fields.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--policies: \"", item, "\": ", std::string(sparse::PolicyName(spec.kind)), " has no n_recent"));
      }
    }
    if (std::find(specs.begin(), specs.end(), spec) == specs.end()) specs.push_back(spec);
  }
  if (specs.empty()) return absl::InvalidArgumentError("--policies: no policy given");
  return specs;
}

absl::StatusOr<std::vector<double>> ParseSparsities(std::string_view csv) {
  std::vector<double> percents;
  for (const std::string& item : Items(csv)) {
    double value = 0;
    absl::string_view number = item;
    absl::ConsumeSuffix(&number, "%");
    if (!absl::SimpleAtod(number, &value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--sparsities: \"", item, "\" is not a number (percent, e.g. 92.5)"));
    }
    if (!(value >= 0 && value < 100)) {
      return absl::InvalidArgumentError(absl::StrCat("--sparsities: ", item, " must be a percent in [0, 100)"));
    }
    if (std::find(percents.begin(), percents.end(), value) == percents.end()) percents.push_back(value);
  }
  if (percents.empty()) return absl::InvalidArgumentError("--sparsities: no sparsity given");
  return percents;
}

std::string FormatPercent(double percent) {
  // %.10g drops trailing zeros; 10 digits keep any percent a person types.
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.10g", percent);
  return buf;
}

std::vector<SweepConfig> BuildGrid(const std::vector<PolicySpec>& policies, const std::vector<double>& sparsities) {
  std::vector<SweepConfig> grid;
  for (const PolicySpec& spec : policies) {
    std::string name(sparse::PolicyName(spec.kind));
    if (spec.n_recent > 0) name = absl::StrCat(name, "_nr", spec.n_recent);
    if (spec.kv_format != sparse::KvFormat::kAuto)
      absl::StrAppend(&name, "_", std::string(sparse::KvFormatName(spec.kv_format)));
    if (spec.kind == sparse::PolicyKind::kDense) {
      grid.push_back({spec.kind, name, 0.0, name + "_0", 0, spec.kv_format});
      continue;
    }
    for (double s : sparsities) {
      grid.push_back({spec.kind, name, s, absl::StrCat(name, "_", FormatPercent(s)), spec.n_recent, spec.kv_format});
    }
  }
  return grid;
}

std::vector<SweepConfig> BuildGrid(const std::vector<PolicySpec>& policies, const std::vector<double>& sparsities,
                                   const std::vector<int32_t>& parallel_windows) {
  std::vector<SweepConfig> grid;
  for (const SweepConfig& base : BuildGrid(policies, sparsities)) {
    for (int32_t w : parallel_windows) {
      SweepConfig c = base;
      c.parallel_window = w;
      if (w > 0) absl::StrAppend(&c.label, "_pw", w);
      grid.push_back(std::move(c));
    }
  }
  return grid;
}

std::vector<SweepConfig> BuildGrid(const std::vector<PolicySpec>& policies, const std::vector<double>& sparsities,
                                   const std::vector<int32_t>& parallel_windows,
                                   const std::vector<int32_t>& speculative_windows) {
  std::vector<SweepConfig> grid;
  for (const SweepConfig& base : BuildGrid(policies, sparsities)) {
    for (int32_t w : parallel_windows) {
      SweepConfig c = base;
      c.parallel_window = w;
      if (w > 0) absl::StrAppend(&c.label, "_pw", w);
      grid.push_back(std::move(c));
    }
    for (int32_t w : speculative_windows) {
      if (w == 0) continue;  // the in-order run, above when parallel_windows has 0
      SweepConfig c = base;
      c.speculative_window = w;
      absl::StrAppend(&c.label, "_sw", w);
      grid.push_back(std::move(c));
    }
  }
  return grid;
}

absl::StatusOr<std::vector<int32_t>> ParseParallelWindows(std::string_view csv, std::string_view flag) {
  std::vector<int32_t> windows;
  for (absl::string_view part : absl::StrSplit(absl::string_view(csv.data(), csv.size()), ',')) {
    int32_t w = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(part), &w) || w < 0) {
      return absl::InvalidArgumentError(absl::StrCat(absl::string_view(flag.data(), flag.size()), ": \"",
                                                     std::string(part).substr(0, 32),
                                                     "\" is not an integer >= 0 (0: off)"));
    }
    if (std::find(windows.begin(), windows.end(), w) == windows.end()) windows.push_back(w);
  }
  return windows;
}

std::vector<SweepConfig> BuildGrid(const std::vector<sparse::PolicyKind>& policies,
                                   const std::vector<double>& sparsities) {
  std::vector<PolicySpec> specs;
  for (sparse::PolicyKind kind : policies) specs.push_back({kind, 0});
  return BuildGrid(specs, sparsities);
}

}  // namespace argen::sweep
