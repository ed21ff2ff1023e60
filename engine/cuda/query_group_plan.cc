#include "engine/cuda/query_group_plan.h"

#include <algorithm>

namespace argen::cuda {

QueryGroupPlan PlanQueryGroups(std::span<const QueryRun> runs, std::span<const int32_t> sizes) {
  QueryGroupPlan plan;
  for (const QueryRun& run : runs) plan.plain_pairs = std::max(plan.plain_pairs, run.first + run.count);
  if (sizes.size() < 2) return plan;
  // The groupable runs after the last run that cannot group.
  size_t from = 0;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i].groupable) from = i + 1;
  }
  plan.plain_pairs = from == 0 ? 0 : runs[from - 1].first + runs[from - 1].count;
  const int32_t largest = sizes.back();
  for (size_t i = from; i < runs.size(); ++i) {
    const int32_t n = runs[i].count, chunks = (n + largest - 1) / largest;
    for (int32_t c = 0, at = runs[i].first; c < chunks; ++c) {
      const int32_t pairs = n / chunks + (c < n % chunks ? 1 : 0);
      const int32_t size = *std::lower_bound(sizes.begin(), sizes.end(), pairs);
      for (int32_t side = 0; side < 2; ++side) plan.groups.push_back({size, at, pairs, side});
      at += pairs;
    }
  }
  std::stable_sort(plan.groups.begin(), plan.groups.end(),
                   [](const PlannedGroup& a, const PlannedGroup& b) { return a.size < b.size; });
  return plan;
}

}  // namespace argen::cuda
