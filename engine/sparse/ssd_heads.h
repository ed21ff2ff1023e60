// ssd's head classification file, shipped next to a model as ssd_heads.json
// (made by argen_characterize --ssd_heads from a calibration prompt set;
// docs/policies.md). One JSON object:
//   {"format": "argen-ssd-heads-v1", "layers": L, "kv_heads": G,
//    "semantic": [[0|1 x G] x L],            per (layer, kv head): 1 semantic
//    "locality": [[s x G] x L],              optional: the scores classified
//    "score": "...", "window": 32, "threshold": 0.45, "calibration": {...}}  optional, provenance
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/sparse/policy_params.h"

namespace argen::sparse {

inline constexpr const char kSsdHeadsFile[] = "ssd_heads.json";

// Parses the file's text; errors name the field.
absl::StatusOr<HeadClasses> ParseHeadClasses(const std::string& json_text);
// Reads and parses `path`; NotFound when it does not exist.
absl::StatusOr<HeadClasses> LoadHeadClasses(const std::string& path);

// The classification of per-(layer, kv head) scores: semantic when
// score >= threshold (ssd-notes' tau). scores[layer * kv_heads + kv_head].
HeadClasses ClassifyHeads(int32_t layers, int32_t kv_heads, const std::vector<double>& scores, double threshold);

struct HeadClassesProvenance {
  std::string model;
  std::string score;     // which locality score was classified
  int32_t window = 0;    // its window w
  double threshold = 0;  // tau
  std::string prompts;   // calibration prompt file
  int32_t prompt_count = 0;
  std::string command;  // the command that made the file
};

// The file's text (pretty, stable key order), scores optional (empty: none).
std::string HeadClassesJson(const HeadClasses& classes, const std::vector<double>& scores,
                            const HeadClassesProvenance& provenance);

}  // namespace argen::sparse
