// Admission by priority with aging (scheduler/priority.h): the rule itself,
// a high request overtaking earlier normal ones when the batch frees up, and
// a low request finishing under a sustained stream of high ones only because
// of aging (without it, it waits the stream out).
#include "scheduler/priority.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "scheduler/scheduler.h"
#include "scheduler/tests/fake_engine.h"
#include "scheduler/tests/scheduler_test_util.h"

namespace argen::scheduler {
namespace {

using testing::CollectEvents;
using testing::FakeEngine;
using testing::FakeEngineOptions;
using testing::FindFinished;
using testing::MakeRequest;
using testing::RawEncoder;

TEST(PriorityTest, NamesRoundTripAndUnknownNamesAreListed) {
  for (Priority p : {Priority::kLow, Priority::kNormal, Priority::kHigh}) {
    EXPECT_EQ(ParsePriority(PriorityName(p)).value(), p);
  }
  absl::StatusOr<Priority> bad = ParsePriority("urgent");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("low, normal, high"), std::string::npos);
}

TEST(PriorityTest, AgingRaisesOneLevelPerIntervalUpToHigh) {
  const absl::Duration a = absl::Seconds(10);
  EXPECT_EQ(AgedLevel(Priority::kLow, absl::Seconds(0), a), 0);
  EXPECT_EQ(AgedLevel(Priority::kLow, absl::Seconds(9.9), a), 0);
  EXPECT_EQ(AgedLevel(Priority::kLow, absl::Seconds(10), a), 1);
  EXPECT_EQ(AgedLevel(Priority::kLow, absl::Seconds(20), a), 2);
  EXPECT_EQ(AgedLevel(Priority::kLow, absl::Hours(5), a), 2);
  EXPECT_EQ(AgedLevel(Priority::kNormal, absl::Seconds(10), a), 2);
  EXPECT_EQ(AgedLevel(Priority::kHigh, absl::Hours(1), a), 2);
  EXPECT_EQ(AgedLevel(Priority::kLow, absl::Hours(1), absl::ZeroDuration()), 0);  // no aging
}

TEST(PriorityTest, HigherLevelFirstThenEarlierAcceptance) {
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  const absl::Duration aging = absl::Seconds(10);
  const QueuedRank normal_early{Priority::kNormal, t0, 1};
  const QueuedRank high_late{Priority::kHigh, t0 + absl::Seconds(1), 2};
  const QueuedRank low_early{Priority::kLow, t0, 0};
  // At t0 + 2 s: high first, normal before low.
  const absl::Time now = t0 + absl::Seconds(2);
  EXPECT_TRUE(AdmitsBefore(high_late, normal_early, now, aging));
  EXPECT_FALSE(AdmitsBefore(normal_early, high_late, now, aging));
  EXPECT_TRUE(AdmitsBefore(normal_early, low_early, now, aging));
  // After 20 s the low one is high too and, accepted first, goes first.
  const absl::Time later = t0 + absl::Seconds(20);
  EXPECT_TRUE(AdmitsBefore(low_early, high_late, later, aging));
  // Equal level and time: acceptance order.
  const QueuedRank twin{Priority::kNormal, t0, 5};
  EXPECT_TRUE(AdmitsBefore(normal_early, twin, now, aging));
  EXPECT_FALSE(AdmitsBefore(twin, normal_early, now, aging));
}

std::unique_ptr<Scheduler> Make(FakeEngine& engine, SchedulerOptions options) {
  auto s = Scheduler::Create(&engine, options, RawEncoder, nullptr);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

bool WaitStarted(RequestHandle& h, std::vector<RequestEvent>& seen, absl::Duration timeout) {
  const absl::Time end = absl::Now() + timeout;
  while (absl::Now() < end) {
    std::optional<RequestEvent> e = h.Next(absl::Milliseconds(5));
    if (!e) continue;
    const bool started = std::holds_alternative<StartedEvent>(*e);
    seen.push_back(std::move(*e));
    if (started) return true;
  }
  return false;
}

TEST(PrioritySchedulingTest, HighIsAdmittedBeforeEarlierNormalsWhenTheBatchFrees) {
  FakeEngineOptions eo;
  eo.step_time = absl::Milliseconds(3);  // ~50 ms per request: the queue fills meanwhile
  eo.kv_budget_bytes = int64_t{1} << 40;
  eo.max_batch_rows = 2;  // one image at a time: the batch is full while "running" runs
  FakeEngine engine(eo);
  SchedulerOptions o;
  o.priority_aging = absl::Hours(1);
  auto s = Make(engine, o);
  auto running = s->Submit(MakeRequest("running")).value();
  std::vector<RequestEvent> seen;
  ASSERT_TRUE(WaitStarted(*running, seen, absl::Seconds(10)));
  auto submit = [&](const std::string& prompt, Priority p) {
    SubmitOptions so;
    so.priority = p;
    return s->Submit(MakeRequest(prompt), so).value();
  };
  auto n1 = submit("normal-1", Priority::kNormal);
  auto n2 = submit("normal-2", Priority::kNormal);
  auto l1 = submit("low-1", Priority::kLow);
  auto h1 = submit("high-1", Priority::kHigh);
  for (auto* h : {&running, &n1, &n2, &l1, &h1}) EXPECT_TRUE(FindFinished(CollectEvents(**h))->status.ok());
  EXPECT_EQ(engine.added_prompts(), (std::vector<std::string>{"running", "high-1", "normal-1", "normal-2", "low-1"}));
}

// A feeder keeps high requests waiting at all times; returns whether the low
// request finished while the feeder was still running.
struct StreamResult {
  bool low_finished_during_stream = false;
  int highs_after_low_admitted_before_it = 0;
};

StreamResult LowUnderHighStream(absl::Duration aging) {
  FakeEngineOptions eo;
  eo.step_time = absl::Milliseconds(2);  // 16 tokens: ~35 ms per request
  eo.kv_budget_bytes = int64_t{1} << 40;
  eo.max_batch_rows = 2;
  FakeEngine engine(eo);
  SchedulerOptions o;
  o.queue_limit = 64;
  o.priority_aging = aging;
  auto s = Make(engine, o);
  std::atomic<bool> stop{false};
  std::atomic<int> highs{0};
  std::vector<std::shared_ptr<RequestHandle>> handles;
  absl::Mutex handles_mu;
  std::thread feeder([&] {
    while (!stop.load()) {
      // Six waiting (~200 ms of work): a feeder that is late on a busy machine
      // still never lets the queue run out of high requests.
      if (s->snapshot().queue_depth < 6) {
        SubmitOptions so;
        so.priority = Priority::kHigh;
        auto h = s->Submit(MakeRequest("high-" + std::to_string(highs.fetch_add(1))), so);
        if (h.ok()) {
          absl::MutexLock lock(&handles_mu);
          handles.push_back(*h);
        }
      }
      absl::SleepFor(absl::Milliseconds(1));
    }
  });
  // Let the stream establish itself, then submit the low one.
  while (highs.load() < 5) absl::SleepFor(absl::Milliseconds(1));
  SubmitOptions so;
  so.priority = Priority::kLow;
  auto low = s->Submit(MakeRequest("low"), so).value();
  const int highs_before_low = highs.load();
  std::vector<RequestEvent> events = CollectEvents(*low, absl::Milliseconds(1500));
  StreamResult r;
  r.low_finished_during_stream = FindFinished(events) != nullptr && FindFinished(events)->status.ok();
  stop.store(true);
  feeder.join();
  if (!r.low_finished_during_stream) {
    EXPECT_TRUE(FindFinished(CollectEvents(*low))->status.ok());  // it runs once the stream stops
  }
  {
    absl::MutexLock lock(&handles_mu);
    for (auto& h : handles) CollectEvents(*h);
  }
  // Highs accepted after the low one (by at least the 2 x aging it needs to
  // reach high) that were nevertheless admitted before it.
  const std::vector<std::string> order = engine.added_prompts();
  const auto low_at = std::find(order.begin(), order.end(), "low");
  for (auto it = order.begin(); it != low_at; ++it) {
    if (it->rfind("high-", 0) == 0 && std::stoi(it->substr(5)) >= highs_before_low) {
      ++r.highs_after_low_admitted_before_it;
    }
  }
  return r;
}

TEST(PrioritySchedulingTest, LowFinishesUnderASustainedHighStreamThroughAging) {
  const StreamResult aged = LowUnderHighStream(absl::Milliseconds(40));
  EXPECT_TRUE(aged.low_finished_during_stream);
  // Without aging it waits the whole stream out (the rule is what saves it).
  const StreamResult strict = LowUnderHighStream(absl::Hours(1));
  EXPECT_FALSE(strict.low_finished_during_stream);
  EXPECT_GT(strict.highs_after_low_admitted_before_it, aged.highs_after_low_admitted_before_it);
}

}  // namespace
}  // namespace argen::scheduler
