// The parallel decoding schedule (engine/model/parallel_schedule.h) on its
// own: for grids without and with row breaks (Janus-Pro, Lumina-mGPT shaped)
// and every window, each step's queries are increasing and read only made
// tokens; every index but the last is written exactly once, every token made
// exactly once; provisional queries start rows 2.. of a grid without row
// breaks, standing in with the newest token of the row two above; the step
// count is ZipAR's 2 W + (H - 2) s; a window of a whole row is today's order.
#include "engine/model/parallel_schedule.h"

#include <vector>

#include "gtest/gtest.h"

namespace argen::model {
namespace {

struct Walk {
  int32_t steps = 1;  // the prefill's
  int32_t provisional = 0;
  std::vector<int32_t> writes, makes;  // per index: writing queries, times made by a query
};

// Runs the schedule to the end, checking each step; forced tokens count as made.
Walk WalkSchedule(int32_t l_dec, int32_t period, int32_t window, const std::vector<int32_t>& forced) {
  ParallelSchedule s(l_dec, period, window, forced);
  Walk w;
  w.writes.assign(l_dec, 0);
  w.makes.assign(l_dec, 0);
  s.Made(0);
  w.makes[0] = 1;
  while (!s.done() && w.steps < 4 * l_dec) {
    const std::vector<ParallelSchedule::Query> qs = s.Next();
    EXPECT_FALSE(qs.empty()) << "step " << w.steps;
    for (size_t j = 0; j < qs.size(); ++j) {
      const ParallelSchedule::Query& q = qs[j];
      if (j > 0) {
        EXPECT_LT(qs[j - 1].index, q.index);
      }
      EXPECT_TRUE(s.known(q.input_token)) << "input of index " << q.index;
      EXPECT_LT(q.index, l_dec - 1);
      if (q.provisional) {
        ++w.provisional;
        EXPECT_FALSE(s.known(q.index));
        EXPECT_GE(q.image_row, 2);
        EXPECT_EQ(q.index, q.image_row * period - 1);  // the row's first query
        EXPECT_EQ(q.input_token / period, q.image_row - 2);
      } else {
        ++w.writes[q.index];
      }
      if (q.records) ++w.makes[q.index + 1];
    }
    s.Commit();
    ++w.steps;
  }
  EXPECT_TRUE(s.done());
  for (int32_t t = 0; t < l_dec; ++t) {
    if (!forced.empty() && forced[t] >= 0) {
      EXPECT_EQ(w.makes[t], 0) << t;
    } else {
      EXPECT_EQ(w.makes[t], 1) << t;
    }
  }
  return w;
}

TEST(ParallelScheduleTest, GridWithoutRowBreaks) {
  constexpr int32_t kW = 8, kH = 8;
  for (int32_t window = 1; window < kW; ++window) {
    const Walk w = WalkSchedule(kW * kH, kW, window, {});
    EXPECT_EQ(w.steps, 2 * kW + (kH - 2) * window) << window;
    EXPECT_EQ(w.provisional, kH - 2) << window;
    // Every index but the last is written once (the provisional ones by their fill); the last never.
    for (int32_t t = 0; t + 1 < kW * kH; ++t) EXPECT_EQ(w.writes[t], 1) << "window " << window << " index " << t;
    EXPECT_EQ(w.writes[kW * kH - 1], 0);
  }
}

TEST(ParallelScheduleTest, AWholeRowWindowIsTodaysOrder) {
  const Walk w = WalkSchedule(64, 8, 8, {});
  EXPECT_EQ(w.steps, 64);
  EXPECT_EQ(w.provisional, 0);
}

TEST(ParallelScheduleTest, GridWithRowBreaksNeedsNoStandIns) {
  // Lumina-mGPT's sequence: H rows of W codes, a forced new line after each but the last.
  constexpr int32_t kW = 6, kH = 5, kP = kW + 1, kLDec = kH * kW + kH - 1;
  std::vector<int32_t> forced(kLDec, -1);
  for (int32_t r = 0; r + 1 < kH; ++r) forced[r * kP + kW] = 1035;
  for (int32_t window = 1; window <= kW; ++window) {
    const Walk w = WalkSchedule(kLDec, kP, window, forced);
    EXPECT_EQ(w.provisional, 0) << window;
    for (int32_t t = 0; t + 1 < kLDec; ++t) EXPECT_EQ(w.writes[t], 1) << "window " << window << " index " << t;
    // Row 1 too starts after `window` tokens (its first input, the new line, is
    // forced): row r starts at step r s + 1, the last ends W steps later. A
    // whole-row window still saves the new lines' steps (each runs beside the
    // next row's first query).
    EXPECT_EQ(w.steps, (kH - 1) * window + kW) << window;
  }
}

}  // namespace
}  // namespace argen::model
