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
  int32_t index = 0;  // line number in the JSONL file, from 0 (blank lines count); DPG: place in name order
  std::string prompt;
  std::string tag;
  std::string metadata_line;  // the JSONL line as read (GenEval's metadata.jsonl copies it verbatim)
  std::string name;           // DPG-Bench: the prompt file's name without ".txt" (the image's name)
};

// Errors name the file and the line at fault; an empty set is an error.
absl::StatusOr<std::vector<BenchmarkPrompt>> LoadPrompts(const std::string& path);

// DPG-Bench's prompt folder (ELLA's dpg_bench/prompts): one prompt a
// `<name>.txt` file, its text with surrounding whitespace stripped; tag
// "dpg". Ordered by name, numerically where the names are numbers (0, 1, 2,
// ..., 10), the index being the place in that order. Errors name the file.
absl::StatusOr<std::vector<BenchmarkPrompt>> LoadDpgPrompts(const std::string& dir);

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
