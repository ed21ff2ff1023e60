#include "engine/sparse/ssd_heads.h"

#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace argen::sparse {
namespace {

absl::Status Bad(const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("ssd head classification: ", field, " ", why));
}

}  // namespace

absl::StatusOr<HeadClasses> ParseHeadClasses(const std::string& json_text) {
  const nlohmann::json j = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Bad("file", "is not a JSON object");
  if (j.contains("format") && j["format"] != "argen-ssd-heads-v1") {
    return Bad("format", absl::StrCat("must be \"argen-ssd-heads-v1\", got ", j["format"].dump()));
  }
  HeadClasses c;
  for (const char* key : {"layers", "kv_heads"}) {
    if (!j.contains(key) || !j[key].is_number_integer() || j[key].get<int64_t>() < 1 ||
        j[key].get<int64_t>() > kMaxClassifiedHeads) {
      return Bad(key, absl::StrCat("must be an integer in [1, ", kMaxClassifiedHeads, "]"));
    }
  }
  c.layers = j["layers"].get<int32_t>();
  c.kv_heads = j["kv_heads"].get<int32_t>();
  if (int64_t{c.layers} * c.kv_heads > kMaxClassifiedHeads) {
    return Bad("layers x kv_heads",
               absl::StrCat("(", c.layers, " x ", c.kv_heads, ") must be at most ", kMaxClassifiedHeads));
  }
  const nlohmann::json& sem = j.contains("semantic") ? j["semantic"] : nlohmann::json();
  if (!sem.is_array() || static_cast<int32_t>(sem.size()) != c.layers) {
    return Bad("semantic", absl::StrCat("must be an array of ", c.layers, " layers"));
  }
  for (int32_t l = 0; l < c.layers; ++l) {
    if (!sem[l].is_array() || static_cast<int32_t>(sem[l].size()) != c.kv_heads) {
      return Bad(absl::StrCat("semantic[", l, "]"), absl::StrCat("must be an array of ", c.kv_heads, " kv heads"));
    }
    for (int32_t g = 0; g < c.kv_heads; ++g) {
      const nlohmann::json& v = sem[l][g];
      if (!v.is_number_integer() || (v.get<int64_t>() != 0 && v.get<int64_t>() != 1)) {
        return Bad(absl::StrCat("semantic[", l, "][", g, "]"), "must be 0 (spatial) or 1 (semantic)");
      }
      c.semantic.push_back(static_cast<uint8_t>(v.get<int64_t>()));
    }
  }
  return c;
}

absl::StatusOr<HeadClasses> LoadHeadClasses(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("ssd head classification: cannot open ", path));
  std::stringstream text;
  text << in.rdbuf();
  absl::StatusOr<HeadClasses> c = ParseHeadClasses(text.str());
  if (!c.ok()) return absl::Status(c.status().code(), absl::StrCat(path, ": ", c.status().message()));
  return c;
}

HeadClasses ClassifyHeads(int32_t layers, int32_t kv_heads, const std::vector<double>& scores, double threshold) {
  HeadClasses c;
  c.layers = layers;
  c.kv_heads = kv_heads;
  for (int32_t i = 0; i < layers * kv_heads; ++i) {
    const double s = i < static_cast<int32_t>(scores.size()) ? scores[i] : NAN;
    c.semantic.push_back(s >= threshold ? 1 : 0);  // NaN (no query): spatial
  }
  return c;
}

std::string HeadClassesJson(const HeadClasses& classes, const std::vector<double>& scores,
                            const HeadClassesProvenance& provenance) {
  nlohmann::ordered_json j;
  j["format"] = "argen-ssd-heads-v1";
  j["model"] = provenance.model;
  j["layers"] = classes.layers;
  j["kv_heads"] = classes.kv_heads;
  j["score"] = provenance.score;
  j["window"] = provenance.window;
  j["threshold"] = provenance.threshold;
  j["calibration"] = {
      {"prompts", provenance.prompts}, {"count", provenance.prompt_count}, {"command", provenance.command}};
  nlohmann::ordered_json sem = nlohmann::ordered_json::array(), loc = nlohmann::ordered_json::array();
  for (int32_t l = 0; l < classes.layers; ++l) {
    nlohmann::ordered_json srow = nlohmann::ordered_json::array(), lrow = nlohmann::ordered_json::array();
    for (int32_t g = 0; g < classes.kv_heads; ++g) {
      const size_t i = static_cast<size_t>(l) * classes.kv_heads + g;
      srow.push_back(static_cast<int>(classes.semantic[i]));
      if (i < scores.size()) {
        // Four decimals: the file stays small and diffs stay readable.
        lrow.push_back(std::isfinite(scores[i]) ? nlohmann::ordered_json(std::round(scores[i] * 1e4) / 1e4)
                                                : nlohmann::ordered_json(nullptr));
      }
    }
    sem.push_back(srow);
    if (!scores.empty()) loc.push_back(lrow);
  }
  j["semantic"] = sem;
  if (!scores.empty()) j["locality"] = loc;
  return j.dump(1) + "\n";
}

}  // namespace argen::sparse
