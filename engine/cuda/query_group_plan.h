// Which of a dense decode pass's queries attend as query groups
// (kernels/query_groups.h) and how they are cut: host-only, so CI tests it.
// A pass lists each row pair's queries consecutively (a run); a run of
// several queries with nested key sets can group. The plain rows must be a
// prefix of the pass, so a run that cannot group makes every run before it
// plain too (ForwardStep puts the single-query rows first).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace argen::cuda {

// One row pair's queries in the pass: pairs [first, first + count).
struct QueryRun {
  int32_t first = 0, count = 0;
  bool groupable = false;  // dense, several queries, nested key sets
};

// A group: `pairs` consecutive queries of one run from first_pair, on one
// CFG side (row 2 * pair + side), in `size` slots (the last ones empty).
struct PlannedGroup {
  int32_t size = 0, first_pair = 0, pairs = 0, side = 0;
};

struct QueryGroupPlan {
  int32_t plain_pairs = 0;           // pairs [0, plain_pairs) attend one by one
  std::vector<PlannedGroup> groups;  // by size, increasing (one launch a size)
};

// `sizes`: the group sizes the attention kernels take, increasing. Each
// groupable run after the plain prefix is cut into as few chunks of at most
// the largest size as it takes, as even as they come, each in the smallest
// size that holds it. No groups when fewer than two sizes are given.
QueryGroupPlan PlanQueryGroups(std::span<const QueryRun> runs, std::span<const int32_t> sizes);

}  // namespace argen::cuda
