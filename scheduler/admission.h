// Admission arithmetic: whether a request can ever run under the limits, and
// whether it fits next to what is already running. Pure functions so the
// rules are testable without threads.
#pragma once

#include <cstdint>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"

namespace argen::scheduler {

struct Need {
  int64_t kv_bytes = 0;  // PreparedRequest::kv_bytes
  int32_t rows = 0;      // 2 x num_images
};

struct Limits {
  int64_t kv_budget_bytes = 0;
  int32_t max_batch_rows = 0;
};

// FailedPrecondition saying the need and the limit when the request could not
// run even on an empty engine.
absl::Status CheckEverFits(const Need& need, const Limits& limits, absl::string_view policy_name);

// True when `need` fits beside `in_use` (the sum of admitted needs).
bool FitsBeside(const Need& need, const Need& in_use, const Limits& limits);

}  // namespace argen::scheduler
