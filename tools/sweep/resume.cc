#include "tools/sweep/resume.h"

#include <filesystem>
#include <map>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/sparse/policy_params.h"

namespace argen::sweep {

nlohmann::json SettingsJson(const SweepArgs& args, const std::string& model_name) {
  nlohmann::json j = {{"model", model_name},
                      {"prompts", std::filesystem::path(args.prompts).filename().string()},
                      {"images_per_prompt", args.images_per_prompt},
                      {"seed", args.seed},
                      {"cfg", args.sampling.cfg_weight},
                      {"temperature", args.sampling.temperature},
                      {"top_k", args.sampling.top_k},
                      {"top_p", args.sampling.top_p}};
  if (args.n_recent > 0) j["n_recent"] = args.n_recent;
  if (args.format != OutputFormat::kDefault)
    j["format"] = std::string(OutputFormatName(args.format));  // absent: default
  if (!args.negative_prompt.empty()) j["negative_prompt"] = args.negative_prompt;
  if (args.width > 0) j["size"] = absl::StrCat(args.width, "x", args.height);  // absent: the default size
  if (args.kv_format != sparse::KvFormat::kAuto) {  // absent: auto (a run from before the flag)
    j["kv_cache_dtype"] = std::string(sparse::KvFormatName(args.kv_format));
  }
  if (args.weight_format != model::WeightFormat::kAuto) j["weight_dtype"] = model::WeightFormatName(args.weight_format);
  return j;
}

absl::Status CheckSameSettings(const nlohmann::json& previous, const nlohmann::json& now) {
  for (auto it = now.begin(); it != now.end(); ++it) {
    if (!previous.contains(it.key()) || previous.at(it.key()) != it.value()) {
      return absl::FailedPreconditionError(
          absl::StrCat("--resume: setting \"", it.key(), "\" was ",
                       previous.contains(it.key()) ? previous.at(it.key()).dump() : std::string("absent"), ", now ",
                       it.value().dump(), "; use another --out or drop --resume"));
    }
  }
  // A setting only the earlier run had (e.g. its --n-recent, now unset).
  for (auto it = previous.begin(); it != previous.end(); ++it) {
    if (!now.contains(it.key())) {
      return absl::FailedPreconditionError(absl::StrCat("--resume: setting \"", it.key(), "\" was ", it.value().dump(),
                                                        ", now absent; use another --out or drop --resume"));
    }
  }
  return absl::OkStatus();
}

ResumeState FinishedWork(const std::vector<ManifestEntry>& entries, const std::string& out_dir,
                         int32_t images_per_prompt) {
  // Last entry per (config, prompt, image) wins; a pair is done when all images are present.
  std::map<std::pair<std::string, int32_t>, std::map<int32_t, ManifestEntry>> by_work;
  for (const ManifestEntry& e : entries) {
    if (e.image < 0 || e.image >= images_per_prompt) continue;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(std::filesystem::path(out_dir) / e.path, ec)) continue;
    by_work[{e.config, e.prompt_index}][e.image] = e;
  }
  ResumeState state;
  for (auto& [work, images] : by_work) {
    if (static_cast<int32_t>(images.size()) != images_per_prompt) continue;
    state.done.insert(work);
    for (auto& [i, e] : images) state.kept.push_back(e);
  }
  return state;
}

}  // namespace argen::sweep
