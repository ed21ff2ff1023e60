// server/step_log.h: one line per step after the header, every call forwarded
// to the wrapped observer, and an unwritable path is an error naming the key.
#include "server/step_log.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"

namespace argen::server {
namespace {

struct CountingObserver : scheduler::SchedulerObserver {
  int steps = 0, running = 0;
  void OnStep(const scheduler::StepStats&) override { ++steps; }
  void OnRunning(int32_t, int32_t) override { ++running; }
};

TEST(StepLogTest, WritesOneLinePerStepAndForwards) {
  const std::string path = ::testing::TempDir() + "/argen_step_log.txt";
  CountingObserver inner;
  {
    absl::StatusOr<std::unique_ptr<StepLog>> log = StepLog::Open(path, &inner);
    ASSERT_TRUE(log.ok()) << log.status();
    const absl::Time t0 = absl::Now();
    for (int i = 0; i < 3; ++i) {
      scheduler::StepStats s;
      s.step_index = i;
      s.start = t0 + absl::Milliseconds(10 * i);
      s.interval = i == 0 ? absl::ZeroDuration() : absl::Milliseconds(10);
      s.duration = absl::Milliseconds(9);
      s.loop_time = i == 0 ? absl::ZeroDuration() : absl::Milliseconds(1);
      s.rows_decoded = 60;
      s.rows_prefilled = i == 1 ? 4 : 0;
      s.prefill_tokens = i == 1 ? 200 : 0;
      s.groups_prefilled = i == 1 ? 2 : 0;
      s.running_rows = 64;
      s.queue_depth = 5;
      s.tokens_sampled = 90;
      (*log)->OnStep(s);
    }
    (*log)->OnRunning(64, 32);
  }
  EXPECT_EQ(inner.steps, 3);
  EXPECT_EQ(inner.running, 1);
  std::ifstream f(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(f, line);) lines.push_back(line);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], StepLog::kHeader);
  const std::vector<std::string> second = absl::StrSplit(lines[2], ' ');
  ASSERT_EQ(second.size(), 12u);
  EXPECT_EQ(second[0], "1");
  EXPECT_EQ(second[1], "0.0100");  // start, from the first step
  EXPECT_EQ(second[2], "10.000");  // interval ms
  EXPECT_EQ(second[3], "9.000");   // step ms
  EXPECT_EQ(second[4], "1.000");   // loop ms
  EXPECT_EQ(second[5], "60");
  EXPECT_EQ(second[6], "4");
  EXPECT_EQ(second[7], "200");
  EXPECT_EQ(second[11], "90");  // tokens made, all images
}

TEST(StepLogTest, UnwritablePathNamesTheKey) {
  CountingObserver inner;
  absl::StatusOr<std::unique_ptr<StepLog>> log = StepLog::Open("/nonexistent/dir/steps.txt", &inner);
  ASSERT_FALSE(log.ok());
  EXPECT_NE(log.status().message().find("step_log"), std::string::npos);
}

}  // namespace
}  // namespace argen::server
