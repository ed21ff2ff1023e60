// --resume: a long sweep (the full GPU grid) can be stopped and run again into
// the same --out. The settings that change images (model, prompts, sampling,
// images per prompt, seed, --n-recent, --size, --kv-cache-dtype) are kept in OUT/sweep_settings.json
// and must match; a (configuration, prompt) whose images are all in the
// manifest and on disk is skipped, everything else runs again.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tools/sweep/manifest.h"
#include "tools/sweep/sweep_args.h"

namespace argen::sweep {

// The image-changing settings of a run; model_name is the checkpoint folder's name.
// n_recent is there only when --n-recent is set, size only with --size and
// kv_cache_dtype and weight_dtype only when not auto (a default run's file is as before).
nlohmann::json SettingsJson(const SweepArgs& args, const std::string& model_name);

// Names the first field that differs (or is in only one of them), or OK.
absl::Status CheckSameSettings(const nlohmann::json& previous, const nlohmann::json& now);

struct ResumeState {
  std::vector<ManifestEntry> kept;                 // entries to keep in the manifest
  std::set<std::pair<std::string, int32_t>> done;  // (config label, prompt index)
};

// From the entries of an earlier manifest: complete (config, prompt) pairs
// (every image 0..images_per_prompt-1 listed and its file present under out_dir).
ResumeState FinishedWork(const std::vector<ManifestEntry>& entries, const std::string& out_dir,
                         int32_t images_per_prompt);

}  // namespace argen::sweep
