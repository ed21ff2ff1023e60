#include "engine/model/backend.h"

#include <vector>

#include "engine/model/batch_checks.h"
#include "engine/model/step_checks.h"

namespace argen::model {

absl::Status Backend::Prefill(const PrefillBatch& batch, const StepOutputs& out) {
  std::vector<RowState*> rows;
  if (absl::Status s = CheckPrefillBatch(
          batch, out, Limits(), [this](RowId id) { return FindLiveRow(id); }, &rows);
      !s.ok()) {
    return s;
  }
  StepPlanBuilder builder;
  PlanOfPrefill(batch, &builder);
  return Forward(builder.Plan(), out);
}

absl::Status Backend::Decode(const DecodeBatch& batch, const StepOutputs& out) {
  std::vector<RowState*> rows;
  if (absl::Status s = CheckDecodeBatch(
          batch, out, Limits(), [this](RowId id) { return FindLiveRow(id); }, &rows);
      !s.ok()) {
    return s;
  }
  StepPlanBuilder builder;
  PlanOfDecode(batch, &builder);
  return Forward(builder.Plan(), out);
}

}  // namespace argen::model
