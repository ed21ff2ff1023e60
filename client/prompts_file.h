// generate --prompts-file: one request per line, either the prompt itself or
// a JSON object (JSONL) whose fields override the command line's for that
// line: prompt (required), count, seed, policy ("name" or "name:sparsity"),
// sparsity, n_att, n_recent, n_sink, kv_cache_dtype ("auto" or "fp8"), cfg,
// temperature, top_k, top_p, request_id. A line's "policy" replaces the
// policy's name and sparsity but keeps the kv_cache_dtype. Blank lines and
// lines starting with '#' are skipped; other JSON fields (e.g. the benchmark
// file's "tag") are ignored and reported.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "argen/v1/argen.pb.h"

namespace argen::client {

struct PromptLine {
  int line = 0;                 // 1-based line number in the file
  v1::GenerateRequest request;  // the base request with the line's fields applied
};

struct PromptsFile {
  std::vector<PromptLine> lines;
  std::set<std::string> ignored_fields;
};

// `base` holds what the command line set. Errors name the file, line and field.
absl::StatusOr<PromptsFile> ParsePrompts(const std::string& text, const std::string& source,
                                         const v1::GenerateRequest& base);
absl::StatusOr<PromptsFile> ReadPromptsFile(const std::string& path, const v1::GenerateRequest& base);

}  // namespace argen::client
