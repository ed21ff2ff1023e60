#include "engine/model/backend.h"

#include <vector>

#include "absl/strings/str_cat.h"
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

absl::Status CheckTokenHead(const ModelSpec& spec, const TokenHead* head) {
  if (!spec.vector_tokens()) {
    if (head == nullptr) return absl::OkStatus();
    return absl::InvalidArgumentError("a token head was given for a model whose tokens are codes");
  }
  if (head == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("the model's tokens are vectors (token_dim ", spec.output.token_dim,
                                                   "): its family must give the backend a token head"));
  }
  if (head->condition_width() != spec.vector_head_in() || head->token_dim() != spec.output.token_dim) {
    return absl::InvalidArgumentError(absl::StrCat("the token head takes ", head->condition_width(),
                                                   " floats and draws ", head->token_dim(), "; the model gives ",
                                                   spec.vector_head_in(), " and feeds back ", spec.output.token_dim));
  }
  return absl::OkStatus();
}

}  // namespace argen::model
