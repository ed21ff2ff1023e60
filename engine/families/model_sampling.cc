#include "engine/families/model_sampling.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "engine/model/sampler.h"
#include "nlohmann/json.hpp"

namespace argen::families {

absl::Status ApplyCheckpointSamplingDefaults(const std::string& model_dir, engine::SamplingParams& defaults) {
  constexpr char kKey[] = "argen_sampling_defaults";
  const std::string path = (std::filesystem::path(model_dir) / "config.json").string();
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::ostringstream text;
  text << in.rdbuf();
  const nlohmann::json root = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded() || !root.is_object())
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
  const auto it = root.find(kKey);
  if (it == root.end() || it->is_null()) return absl::OkStatus();
  auto bad = [&](const std::string& field, absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": field '", kKey, field.empty() ? "" : ".", field, "' ", why));
  };
  if (!it->is_object()) return bad("", "must be an object {cfg_weight, temperature, top_k, top_p}");
  engine::SamplingParams out = defaults;
  for (const auto& [field, value] : it->items()) {
    if (field == "top_k") {
      if (!value.is_number_integer()) return bad(field, "must be an integer");
      const int64_t k = value.get<int64_t>();
      if (absl::Status s = model::CheckTopK(k, 0); !s.ok()) return bad(field, s.message());
      out.top_k = static_cast<int32_t>(k);
      continue;
    }
    if (field != "cfg_weight" && field != "temperature" && field != "top_p") {
      return bad(field, "is not one of cfg_weight, temperature, top_k, top_p");
    }
    if (!value.is_number()) return bad(field, "must be a number");
    const double x = value.get<double>();
    const absl::Status s = field == "cfg_weight"    ? model::CheckCfgWeight(x)
                           : field == "temperature" ? model::CheckTemperature(x)
                                                    : model::CheckTopP(x);
    if (!s.ok()) return bad(field, s.message());
    (field == "cfg_weight"    ? out.cfg_weight
     : field == "temperature" ? out.temperature
                              : out.top_p) = static_cast<float>(x);
  }
  defaults = out;
  return absl::OkStatus();
}

}  // namespace argen::families
