#include "engine/families/nextstep/nextstep_family.h"

#include "absl/strings/str_cat.h"
#include "engine/families/nextstep/nextstep_config.h"
#include "engine/families/nextstep/nextstep_prompt.h"
#include "engine/families/nextstep/nextstep_spec.h"

namespace argen::nextstep {
namespace {

absl::StatusOr<families::FamilyModel> LoadNextStep(const std::string& model_dir,
                                                   const families::FamilyOptions& options) {
  if (absl::Status s = families::CheckFamilyOptions("nextstep", options, {}); !s.ok()) return s;
  absl::StatusOr<NextStepConfig> config = LoadNextStepConfig(model_dir);
  if (!config.ok()) return config.status();
  absl::StatusOr<std::shared_ptr<const tokenizer::Tokenizer>> tok = LoadNextStepTokenizer(model_dir);
  if (!tok.ok()) return tok.status();
  if (absl::StatusOr<NextStepTokenIds> ids = FindNextStepTokens(**tok, *config); !ids.ok()) return ids.status();
  if (absl::StatusOr<model::ModelSpec> spec = NextStepSpec(*config); !spec.ok()) return spec.status();
  if (absl::StatusOr<NextStepVaeConfig> vae = LoadNextStepVaeConfig(NextStepVaeDir(model_dir, *config)); !vae.ok()) {
    return vae.status();
  }
  return absl::UnimplementedError(
      absl::StrCat(model_dir,
                   ": a NextStep-1 checkpoint (continuous image tokens). Its decoder, flow-matching head and VAE run "
                   "on the CPU backend, but the engine does not yet drive a vector-token decode loop, so it cannot "
                   "be served (#31)"));
}

}  // namespace

families::Family NextStepFamily() {
  families::Family f;
  f.name = "nextstep";
  f.matches = "model_type nextstep";
  f.recognises = [](const families::ConfigIdentity& id) { return id.model_type == "nextstep"; };
  f.load = LoadNextStep;
  return f;
}

}  // namespace argen::nextstep
