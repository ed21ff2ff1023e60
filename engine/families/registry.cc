#include "engine/families/registry.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/families/anole/anole_family.h"
#include "engine/families/emu3/emu3_family.h"
#include "engine/families/janus/janus_family.h"
#include "engine/families/llamagen/llamagen_family.h"
#include "engine/families/lumina/lumina_family.h"
#include "engine/families/model_sampling.h"
#include "engine/families/nextstep/nextstep_family.h"
#include "nlohmann/json.hpp"

namespace argen::families {

const std::vector<Family>& Families() {
  static const auto* families = new std::vector<Family>{
      // Anole before Lumina-mGPT: both are model_type chameleon; Anole's -hf folder is told by its name.
      janus::JanusFamily(), anole::AnoleFamily(),       lumina::LuminaFamily(),
      emu3::Emu3Family(),   llamagen::LlamaGenFamily(), nextstep::NextStepFamily(),
  };
  return *families;
}

absl::StatusOr<ConfigIdentity> ReadConfigIdentity(const std::string& model_dir) {
  const std::string path = (std::filesystem::path(model_dir) / "config.json").string();
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open"));
  std::ostringstream text;
  text << in.rdbuf();
  const nlohmann::json root = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (root.is_discarded()) return absl::InvalidArgumentError(absl::StrCat(path, ": malformed JSON"));
  if (!root.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": top level is not a JSON object"));
  ConfigIdentity id;
  const std::filesystem::path dir = std::filesystem::path(model_dir).lexically_normal();
  id.dir_name = dir.filename().empty() ? dir.parent_path().filename().string() : dir.filename().string();
  if (auto it = root.find("model_type"); it != root.end() && !it->is_null()) {
    if (!it->is_string())
      return absl::InvalidArgumentError(absl::StrCat(path, ": field 'model_type' must be a string"));
    id.model_type = it->get<std::string>();
  }
  if (auto it = root.find("architectures"); it != root.end() && !it->is_null()) {
    if (!it->is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": field 'architectures' must be a list of strings"));
    }
    for (const nlohmann::json& a : *it) {
      if (!a.is_string()) {
        return absl::InvalidArgumentError(absl::StrCat(path, ": field 'architectures' must be a list of strings"));
      }
      id.architectures.push_back(a.get<std::string>());
    }
  }
  return id;
}

absl::StatusOr<const Family*> FindFamily(const ConfigIdentity& identity) {
  for (const Family& f : Families()) {
    if (f.recognises(identity)) return &f;
  }
  std::vector<std::string> known;
  for (const Family& f : Families()) known.push_back(absl::StrCat(f.name, " (", f.matches, ")"));
  return absl::InvalidArgumentError(
      absl::StrCat("config.json: model_type '", identity.model_type, "' (architectures [",
                   absl::StrJoin(identity.architectures, ", "),
                   "]) is not a known model family; known families: ", absl::StrJoin(known, ", ")));
}

absl::StatusOr<FamilyModel> LoadFamilyModel(const std::string& model_dir, const FamilyOptions& options) {
  // Layouts published without config.json (LlamaGen) are recognised by their files.
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::path(model_dir) / "config.json", ec)) {
    for (const Family& f : Families()) {
      if (f.recognises_dir && f.recognises_dir(model_dir)) return f.load(model_dir, options);
    }
  }
  absl::StatusOr<ConfigIdentity> identity = ReadConfigIdentity(model_dir);
  if (!identity.ok()) return identity.status();
  absl::StatusOr<const Family*> family = FindFamily(*identity);
  if (!family.ok()) return family.status();
  absl::StatusOr<FamilyModel> model = (*family)->load(model_dir, options);
  if (!model.ok()) return model.status();
  // The checkpoint's own sampling defaults, where it states any, over the family's.
  if (absl::Status s = ApplyCheckpointSamplingDefaults(model_dir, model->default_sampling); !s.ok()) return s;
  return model;
}

}  // namespace argen::families
