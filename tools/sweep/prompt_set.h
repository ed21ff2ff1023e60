// The benchmark prompt set (tools/sweep/benchmark_prompts.jsonl): one JSON
// object a line with at least "prompt" and "tag" (GenEval's metadata shape;
// the other fields are the scorer's business). A prompt keeps its line index
// so that images are named after it and the scorer finds its metadata.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace argen::sweep {

struct BenchmarkPrompt {
  int32_t index = 0;  // line number in the JSONL file, from 0 (blank lines count)
  std::string prompt;
  std::string tag;
};

// Errors name the file and the line at fault; an empty set is an error.
absl::StatusOr<std::vector<BenchmarkPrompt>> LoadPrompts(const std::string& path);

// Every `every`-th prompt (indices 0, every, 2*every, ...: the set is grouped
// by category, so a stride keeps every category), then at most `limit` of
// them (0: no limit). every >= 1.
std::vector<BenchmarkPrompt> Subsample(const std::vector<BenchmarkPrompt>& prompts, int32_t every, int32_t limit);

// At most `per_tag` prompts of each tag, evenly spread over that tag's
// prompts, in file order (0: all). The categories are very unequal in size
// (e.g. 6 single-object against 300 color-attribution prompts), so a quick
// run that should score every category uses this.
std::vector<BenchmarkPrompt> PerCategory(const std::vector<BenchmarkPrompt>& prompts, int32_t per_tag);

}  // namespace argen::sweep
