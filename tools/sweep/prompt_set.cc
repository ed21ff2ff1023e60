#include "tools/sweep/prompt_set.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

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
    p.metadata_line = line;
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

namespace {

// Name order, numbers by value: "2" before "10"; a number before a word.
bool NameBefore(const std::string& a, const std::string& b) {
  const bool a_number = !a.empty() && std::all_of(a.begin(), a.end(), absl::ascii_isdigit);
  const bool b_number = !b.empty() && std::all_of(b.begin(), b.end(), absl::ascii_isdigit);
  if (a_number != b_number) return a_number;
  if (a_number && a.size() != b.size()) return a.size() < b.size();
  return a < b;
}

}  // namespace

absl::StatusOr<std::vector<BenchmarkPrompt>> LoadDpgPrompts(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(
        absl::StrCat("--dpg-prompts \"", dir, "\" is not a directory (DPG-Bench's dpg_bench/prompts folder)"));
  }
  std::vector<BenchmarkPrompt> prompts;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    if (!e.is_regular_file() || e.path().extension() != ".txt") continue;
    std::ifstream in(e.path(), std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) return absl::DataLossError(absl::StrCat("DPG prompt ", e.path().string(), " cannot be read"));
    BenchmarkPrompt p;
    p.prompt = std::string(absl::StripAsciiWhitespace(text.str()));
    p.name = e.path().stem().string();
    p.tag = "dpg";
    if (p.prompt.empty())
      return absl::InvalidArgumentError(absl::StrCat("DPG prompt ", e.path().string(), " is empty"));
    // The evaluator keys an image by its name up to the first '.'.
    if (p.name.find('.') != std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("DPG prompt ", e.path().string(), ": a name with a '.' before .txt cannot key its image"));
    }
    prompts.push_back(std::move(p));
  }
  if (ec) return absl::DataLossError(absl::StrCat("--dpg-prompts \"", dir, "\": ", ec.message()));
  if (prompts.empty())
    return absl::InvalidArgumentError(absl::StrCat("--dpg-prompts \"", dir, "\" has no .txt prompt"));
  std::sort(prompts.begin(), prompts.end(),
            [](const BenchmarkPrompt& a, const BenchmarkPrompt& b) { return NameBefore(a.name, b.name); });
  for (size_t i = 0; i < prompts.size(); ++i) prompts[i].index = static_cast<int32_t>(i);
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
