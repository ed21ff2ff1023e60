// PlanQueryGroups (engine/cuda/query_group_plan.h): which queries of a dense
// decode pass attend as query groups, cut into which sizes. Host-only.
#include "engine/cuda/query_group_plan.h"

#include <gtest/gtest.h>

#include <vector>

namespace argen::cuda {
namespace {

bool Same(const PlannedGroup& a, const PlannedGroup& b) {
  return a.size == b.size && a.first_pair == b.first_pair && a.pairs == b.pairs && a.side == b.side;
}

void ExpectGroups(const QueryGroupPlan& plan, const std::vector<PlannedGroup>& want) {
  ASSERT_EQ(plan.groups.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_TRUE(Same(plan.groups[i], want[i]))
        << "group " << i << ": size " << plan.groups[i].size << " first_pair " << plan.groups[i].first_pair << " pairs "
        << plan.groups[i].pairs << " side " << plan.groups[i].side;
  }
}

const std::vector<int32_t> kMha = {1, 2, 4, 8};  // one query head a KV head: groups up to 8
const std::vector<int32_t> kGqa4 = {1, 2};       // four (Emu3): up to 2
const std::vector<int32_t> kGqa5 = {1};          // five (NextStep-1): none

TEST(QueryGroupPlanTest, RunsAfterThePlainRowsAreCutEvenlyIntoTheSmallestSizes) {
  // A single-query pair, then a row with 3 queries and one with 9.
  const std::vector<QueryRun> runs = {{0, 1, false}, {1, 3, true}, {4, 9, true}};
  const QueryGroupPlan plan = PlanQueryGroups(runs, kMha);
  EXPECT_EQ(plan.plain_pairs, 1);
  // 3 -> one chunk in 4 slots; 9 -> 5 + 4 (not 8 + 1), in 8 and 4 slots; by size, both sides each.
  ExpectGroups(plan, {{4, 1, 3, 0}, {4, 1, 3, 1}, {4, 9, 4, 0}, {4, 9, 4, 1}, {8, 4, 5, 0}, {8, 4, 5, 1}});
}

TEST(QueryGroupPlanTest, ARunThatCannotGroupMakesEveryRunBeforeItPlain) {
  // The plain rows are a prefix of the pass: a non-groupable run (a provisional
  // query breaks nesting) after a groupable one takes that one along.
  const std::vector<QueryRun> runs = {{0, 2, true}, {2, 3, false}, {5, 2, true}};
  const QueryGroupPlan plan = PlanQueryGroups(runs, kMha);
  EXPECT_EQ(plan.plain_pairs, 5);
  ExpectGroups(plan, {{2, 5, 2, 0}, {2, 5, 2, 1}});
}

TEST(QueryGroupPlanTest, TheKernelsSizesBoundTheGroups) {
  // Groups of four query heads a KV head take at most 2 queries: 3 -> 2 + 1.
  const std::vector<QueryRun> runs = {{0, 3, true}};
  ExpectGroups(PlanQueryGroups(runs, kGqa4), {{1, 2, 1, 0}, {1, 2, 1, 1}, {2, 0, 2, 0}, {2, 0, 2, 1}});
  // Groups of five take none: every pair plain.
  const QueryGroupPlan none = PlanQueryGroups(runs, kGqa5);
  EXPECT_EQ(none.plain_pairs, 3);
  EXPECT_TRUE(none.groups.empty());
}

TEST(QueryGroupPlanTest, APassWithoutSeveralQueriesARowIsAllPlain) {
  const std::vector<QueryRun> runs = {{0, 1, false}, {1, 1, false}};
  const QueryGroupPlan plan = PlanQueryGroups(runs, kMha);
  EXPECT_EQ(plan.plain_pairs, 2);
  EXPECT_TRUE(plan.groups.empty());
  const QueryGroupPlan empty = PlanQueryGroups({}, kMha);
  EXPECT_EQ(empty.plain_pairs, 0);
  EXPECT_TRUE(empty.groups.empty());
}

}  // namespace
}  // namespace argen::cuda
