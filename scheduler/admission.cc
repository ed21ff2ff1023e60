#include "scheduler/admission.h"

#include "absl/strings/str_cat.h"

namespace argen::scheduler {

absl::Status CheckEverFits(const Need& need, const Limits& limits, absl::string_view policy_name) {
  if (need.kv_bytes > limits.kv_budget_bytes) {
    return absl::FailedPreconditionError(absl::StrCat(
        "request can never fit: it needs ", need.kv_bytes, " bytes of KV cache (", need.rows,
        " rows under policy ", policy_name, ") but the server's KV budget (kv_budget_bytes) is ",
        limits.kv_budget_bytes, " bytes; ask for fewer images or a sparser policy"));
  }
  if (need.rows > limits.max_batch_rows) {
    return absl::FailedPreconditionError(absl::StrCat(
        "request can never fit: num_images needs ", need.rows,
        " batch rows (2 per image for guidance) but the server's max_batch_rows is ",
        limits.max_batch_rows));
  }
  return absl::OkStatus();
}

bool FitsBeside(const Need& need, const Need& in_use, const Limits& limits) {
  return in_use.kv_bytes + need.kv_bytes <= limits.kv_budget_bytes &&
         in_use.rows + need.rows <= limits.max_batch_rows;
}

}  // namespace argen::scheduler
