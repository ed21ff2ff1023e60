#include "tools/sweep/prompt_set.h"

#include <algorithm>
#include <fstream>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace argen::sweep {

absl::StatusOr<std::vector<BenchmarkPrompt>> LoadPrompts(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(absl::StrCat("prompts file \"", path,
                                            "\" cannot be read (the default is relative to the repository "
                                            "root: run from there or pass --prompts)"));
  }
  std::vector<BenchmarkPrompt> prompts;
  std::string line;
  for (int32_t index = 0; std::getline(in, line); ++index) {
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    const std::string where = absl::StrCat(path, ":", index + 1);
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": not a JSON object"));
    }
    BenchmarkPrompt p;
    p.index = index;
    for (auto [field, target] : {std::pair{"prompt", &p.prompt}, {"tag", &p.tag}}) {
      auto it = j.find(field);
      if (it == j.end() || !it->is_string() || it->get<std::string>().empty()) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": field \"", field, "\" must be a non-empty string"));
      }
      *target = it->get<std::string>();
    }
    prompts.push_back(std::move(p));
  }
  if (prompts.empty()) return absl::InvalidArgumentError(absl::StrCat("prompts file \"", path, "\" has no prompts"));
  return prompts;
}

std::vector<BenchmarkPrompt> Subsample(const std::vector<BenchmarkPrompt>& prompts, int32_t every, int32_t limit) {
  std::vector<BenchmarkPrompt> out;
  if (every < 1) every = 1;
  for (size_t i = 0; i < prompts.size(); i += static_cast<size_t>(every)) {
    if (limit > 0 && static_cast<int32_t>(out.size()) >= limit) break;
    out.push_back(prompts[i]);
  }
  return out;
}

std::vector<BenchmarkPrompt> PerCategory(const std::vector<BenchmarkPrompt>& prompts, int32_t per_tag) {
  if (per_tag <= 0) return prompts;
  std::map<std::string, std::vector<size_t>> by_tag;
  for (size_t i = 0; i < prompts.size(); ++i) by_tag[prompts[i].tag].push_back(i);
  std::vector<bool> keep(prompts.size(), false);
  for (const auto& [tag, positions] : by_tag) {
    const size_t n = positions.size(), k = std::min(n, static_cast<size_t>(per_tag));
    for (size_t j = 0; j < k; ++j) keep[positions[j * n / k]] = true;  // evenly spread, first included
  }
  std::vector<BenchmarkPrompt> out;
  for (size_t i = 0; i < prompts.size(); ++i) {
    if (keep[i]) out.push_back(prompts[i]);
  }
  return out;
}

}  // namespace argen::sweep
