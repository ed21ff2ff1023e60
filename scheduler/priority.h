// Request priorities and the admission order among queued requests.
//
// The rule (docs/serving.md, "Scheduling"): a queued request's level is its
// priority (low 0, normal 1, high 2) raised by one for every full `aging`
// interval it has waited, capped at high. The next request to admit is the
// one with the highest level; among equal levels the one accepted first.
// So a low request outranks every request accepted after it once it has
// waited 2 x aging, and can wait behind only requests accepted before that:
// it is never starved. Running requests are never preempted.
#pragma once

#include <cstdint>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace argen::scheduler {

enum class Priority : int32_t { kLow = 0, kNormal = 1, kHigh = 2 };

// "low", "normal", "high"; errors list the names.
absl::StatusOr<Priority> ParsePriority(absl::string_view name);
absl::string_view PriorityName(Priority priority);

// Where a queued request stands for admission.
struct QueuedRank {
  Priority priority = Priority::kNormal;
  absl::Time accepted;
  int64_t sequence = 0;  // acceptance order; breaks ties between equal times
};

// The level after aging (0 .. 2). `aging` <= 0: no aging.
int32_t AgedLevel(Priority priority, absl::Duration waited, absl::Duration aging);

// True when `a` is admitted before `b` at time `now`.
bool AdmitsBefore(const QueuedRank& a, const QueuedRank& b, absl::Time now, absl::Duration aging);

}  // namespace argen::scheduler
