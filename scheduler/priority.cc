#include "scheduler/priority.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

namespace argen::scheduler {

absl::StatusOr<Priority> ParsePriority(absl::string_view name) {
  if (name == "low") return Priority::kLow;
  if (name == "normal") return Priority::kNormal;
  if (name == "high") return Priority::kHigh;
  return absl::InvalidArgumentError(absl::StrCat("\"", std::string(name), "\" is not a priority (low, normal, high)"));
}

absl::string_view PriorityName(Priority priority) {
  switch (priority) {
    case Priority::kLow:
      return "low";
    case Priority::kNormal:
      return "normal";
    case Priority::kHigh:
      return "high";
  }
  return "normal";
}

int32_t AgedLevel(Priority priority, absl::Duration waited, absl::Duration aging) {
  const int32_t base = static_cast<int32_t>(priority);
  const int32_t top = static_cast<int32_t>(Priority::kHigh);
  if (aging <= absl::ZeroDuration() || waited <= absl::ZeroDuration() || base >= top) return base;
  const int64_t steps = absl::IDivDuration(waited, aging, &waited);
  return static_cast<int32_t>(std::min<int64_t>(top, base + steps));
}

bool AdmitsBefore(const QueuedRank& a, const QueuedRank& b, absl::Time now, absl::Duration aging) {
  const int32_t level_a = AgedLevel(a.priority, now - a.accepted, aging);
  const int32_t level_b = AgedLevel(b.priority, now - b.accepted, aging);
  if (level_a != level_b) return level_a > level_b;
  if (a.accepted != b.accepted) return a.accepted < b.accepted;
  return a.sequence < b.sequence;
}

}  // namespace argen::scheduler
