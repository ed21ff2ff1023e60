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
std::vector<BenchmarkPrompt> Subsample(const std::vector<BenchmarkPrompt>& prompts, int32_t every,
                                       int32_t limit);

}  // namespace argen::sweep
