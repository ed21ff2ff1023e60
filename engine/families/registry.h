// The known model families, picked by a checkpoint's config.json (model_type,
// architectures). Adding a family: its folder under engine/families/ and one
// line in registry.cc (docs/ARCHITECTURE.md, "Adding a model family").
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/families/family.h"

namespace argen::families {

// In match order.
const std::vector<Family>& Families();

// Reads <model_dir>/config.json (errors name the file and field).
absl::StatusOr<ConfigIdentity> ReadConfigIdentity(const std::string& model_dir);

// The family that recognises the config, or InvalidArgument naming its
// model_type / architectures and listing the known families.
absl::StatusOr<const Family*> FindFamily(const ConfigIdentity& identity);

// ReadConfigIdentity, FindFamily, then that family's load with `options`
// (an option the family does not take is an error naming it and the family),
// with the checkpoint's own sampling defaults applied (model_sampling.h).
absl::StatusOr<FamilyModel> LoadFamilyModel(const std::string& model_dir, const FamilyOptions& options = {});

}  // namespace argen::families
