// Scheduler behaviour against the deterministic FakeEngine: event order,
// admission by exact KV need under a budget, FIFO without starvation,
// joining a running batch, cancellation, deadlines, queue bound, never-fits,
// draining, engine faults, and VQ decode off the decode loop.
#include "scheduler/scheduler.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

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
using testing::RecordingObserver;

// A request's KV need on an engine like `engine` (whatever its budget is now).
int64_t KvNeed(const FakeEngine& engine, const engine::GenerationRequest& r) {
  FakeEngine probe(engine.options());
  probe.SetKvBudget(int64_t{1} << 50);
  return probe.Prepare(r).value().kv_bytes;
}

std::unique_ptr<Scheduler> Make(FakeEngine& engine, SchedulerOptions options, SchedulerObserver* observer = nullptr) {
  auto s = Scheduler::Create(&engine, options, RawEncoder, observer);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

TEST(SchedulerTest, OneRequestStreamsEventsInOrderWithImagesOfItsTokens) {
  FakeEngine engine;
  SchedulerOptions o;
  engine.SetKvBudget(1 << 20);
  o.progress_interval = absl::Nanoseconds(1);
  auto s = Make(engine, o);
  SubmitOptions submit;
  submit.request_id = "cat";
  auto h = s->Submit(MakeRequest("a cat", 2, 42), submit);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ((*h)->id(), "cat");
  std::vector<RequestEvent> events = CollectEvents(**h);
  ASSERT_GE(events.size(), 5u);
  const auto* queued = std::get_if<QueuedEvent>(&events[0]);
  ASSERT_NE(queued, nullptr);
  EXPECT_EQ(queued->position, 0);
  EXPECT_EQ(queued->rows, 4);
  EXPECT_EQ(queued->seed, 42u);
  EXPECT_EQ(queued->kv_bytes, KvNeed(engine, MakeRequest("a cat", 2, 42)));
  ASSERT_TRUE(std::holds_alternative<StartedEvent>(events[1]));

  const int32_t total = engine.info().image_tokens;
  int32_t last_progress = 0, images = 0;
  for (const RequestEvent& e : events) {
    if (const auto* p = std::get_if<ProgressEvent>(&e)) {
      EXPECT_EQ(p->tokens_total, total);
      EXPECT_GE(p->tokens_done, last_progress);
      last_progress = p->tokens_done;
    }
    if (const auto* img = std::get_if<ImageEvent>(&e)) {
      EXPECT_EQ(img->index, images);
      EXPECT_EQ(img->seed, 42u);
      EXPECT_EQ(img->width, 8);
      // Pixel p carries token (p mod 16) of this image's grid: the tokens the
      // engine sampled reached the decoder unchanged and in raster order.
      ASSERT_EQ(img->encoded.size(), 8u * 8u * 3u);
      for (int32_t t = 0; t < total; ++t) {
        EXPECT_EQ(static_cast<uint8_t>(img->encoded[t * 3]),
                  static_cast<uint8_t>(engine.ExpectedToken(42, img->index, t) * 4));
      }
      ++images;
    }
  }
  EXPECT_EQ(last_progress, total);
  EXPECT_EQ(images, 2);
  const FinishedEvent* fin = FindFinished(events);
  ASSERT_NE(fin, nullptr);
  EXPECT_TRUE(fin->status.ok()) << fin->status;
  EXPECT_EQ(fin->metrics.steps, total);
  EXPECT_EQ(fin->metrics.images, 2);
  EXPECT_EQ(fin->metrics.rows, 4);
  EXPECT_EQ(fin->metrics.peak_kv_bytes, queued->kv_bytes);
  EXPECT_GT(fin->metrics.tokens_per_second, 0);
  EXPECT_GE(fin->metrics.total, fin->metrics.prefill + fin->metrics.decode);
  EXPECT_TRUE(engine.used_from_one_thread());
  EXPECT_EQ(s->snapshot().active_requests, 0);
}

TEST(SchedulerTest, KvNeverExceedsBudgetAndAllFinish) {
  FakeEngineOptions eo;
  eo.step_time = absl::Microseconds(200);
  FakeEngine engine(eo);
  const int64_t need = KvNeed(engine, MakeRequest("p0"));
  SchedulerOptions o;
  engine.SetKvBudget(2 * need + need / 2);  // two at a time
  o.queue_limit = 16;
  RecordingObserver observer;
  auto s = Make(engine, o, &observer);
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (int i = 0; i < 8; ++i) {
    auto h = s->Submit(MakeRequest("p" + std::to_string(i)));
    ASSERT_TRUE(h.ok()) << h.status();
    handles.push_back(*h);
  }
  for (auto& h : handles) {
    auto events = CollectEvents(*h);
    ASSERT_NE(FindFinished(events), nullptr);
    EXPECT_TRUE(FindFinished(events)->status.ok());
  }
  EXPECT_LE(engine.peak_kv_bytes(), engine.info().kv_budget_bytes);
  EXPECT_EQ(engine.max_groups_in_step(), 2);
  for (const StepStats& st : observer.steps()) {
    EXPECT_LE(st.kv_bytes_in_use, engine.info().kv_budget_bytes);
    EXPECT_LE(st.kv_bytes_reserved, engine.info().kv_budget_bytes);
  }
}

// The observer's tokens_sampled is the tokens the step added to its requests,
// however many an image makes a step (parallel or speculative decoding): over
// a run they sum to every image's tokens.
TEST(SchedulerTest, TokensSampledCountsEveryTokenMade) {
  for (int32_t per_step : {1, 3}) {
    FakeEngineOptions eo;
    eo.tokens_per_step = per_step;
    FakeEngine engine(eo);
    engine.SetKvBudget(int64_t{1} << 40);
    RecordingObserver observer;
    auto s = Make(engine, SchedulerOptions{}, &observer);
    std::vector<std::shared_ptr<RequestHandle>> handles;
    for (int i = 0; i < 3; ++i) handles.push_back(s->Submit(MakeRequest("p" + std::to_string(i), 2)).value());
    for (auto& h : handles) ASSERT_TRUE(FindFinished(CollectEvents(*h))->status.ok());
    s.reset();  // the loop's last OnStep is recorded
    int64_t sampled = 0, steps = 0;
    for (const StepStats& st : observer.steps()) {
      sampled += st.tokens_sampled;
      steps += st.rows_decoded > 0 || st.groups_prefilled > 0;
    }
    const int32_t tokens = engine.info().image_tokens;  // 16
    EXPECT_EQ(sampled, 3 * 2 * tokens) << "tokens_per_step " << per_step;
    // One token at the prefill step, then per_step a step: fewer steps for more a step.
    EXPECT_GE(steps, 1 + (tokens - 1 + per_step - 1) / per_step) << "tokens_per_step " << per_step;
  }
}

TEST(SchedulerTest, RowCapLimitsTheBatch) {
  FakeEngineOptions eo;
  eo.step_time = absl::Microseconds(200);
  FakeEngine engine(eo);
  SchedulerOptions o;
  engine.SetKvBudget(int64_t{1} << 40);
  engine.SetMaxBatchRows(4);  // two 1-image requests
  auto s = Make(engine, o);
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (int i = 0; i < 5; ++i) handles.push_back(s->Submit(MakeRequest("x")).value());
  for (auto& h : handles) EXPECT_TRUE(FindFinished(CollectEvents(*h))->status.ok());
  EXPECT_EQ(engine.max_groups_in_step(), 2);
}

TEST(SchedulerTest, LargeHeadIsNotOvertakenBySmallerRequests) {
  FakeEngineOptions eo;
  eo.step_time = absl::Milliseconds(3);  // each request runs ~50 ms: all four queue meanwhile
  FakeEngine engine(eo);
  SchedulerOptions o;
  engine.SetKvBudget(KvNeed(engine, MakeRequest("big", 4)));  // big alone fills it
  auto s = Make(engine, o);
  auto small1 = s->Submit(MakeRequest("big"));  // same prompt length: 1/4 of the budget
  ASSERT_TRUE(small1.ok());
  auto big = s->Submit(MakeRequest("big", 4));
  auto small2 = s->Submit(MakeRequest("s2 "));
  auto small3 = s->Submit(MakeRequest("s3 "));
  ASSERT_TRUE(big.ok() && small2.ok() && small3.ok());
  for (auto* h : {&*small1, &*big, &*small2, &*small3}) {
    EXPECT_TRUE(FindFinished(CollectEvents(**h))->status.ok());
  }
  // small2 would fit beside small1, but the big head goes first.
  EXPECT_EQ(engine.added_prompts(), (std::vector<std::string>{"big", "big", "s2 ", "s3 "}));
  EXPECT_EQ(engine.max_groups_in_step(), 2);  // s2 + s3 together after big
}

TEST(SchedulerTest, RequestJoinsRunningBatchAtStepBoundary) {
  FakeEngineOptions eo;
  eo.token_grid = 8;  // 64 steps
  eo.step_time = absl::Milliseconds(1);
  FakeEngine engine(eo);
  SchedulerOptions o;
  engine.SetKvBudget(1 << 24);
  o.progress_interval = absl::Nanoseconds(1);
  auto s = Make(engine, o);
  auto a = s->Submit(MakeRequest("first", 2)).value();
  // Wait until A has decoded a few tokens, then submit B.
  while (true) {
    auto e = a->Next(absl::Seconds(10));
    ASSERT_TRUE(e.has_value());
    if (const auto* p = std::get_if<ProgressEvent>(&*e); p && p->tokens_done >= 3) break;
  }
  auto b = s->Submit(MakeRequest("second", 1)).value();
  auto events = CollectEvents(*b);
  const auto* started = std::get_if<StartedEvent>(&events[1]);
  ASSERT_NE(started, nullptr);
  EXPECT_EQ(started->batch_rows, 6);  // joined A's 4 rows
  const FinishedEvent* fin = FindFinished(events);
  ASSERT_TRUE(fin && fin->status.ok());
  EXPECT_GT(fin->metrics.mean_batch_rows, 2.0);  // decoded beside A
  auto a_fin_events = CollectEvents(*a);
  auto a_fin = FindFinished(a_fin_events);
  ASSERT_TRUE(a_fin && a_fin->status.ok());
  EXPECT_GT(a_fin->metrics.mean_batch_rows, 4.0);
}

TEST(SchedulerTest, CancelFreesKvBeforeTheNextStep) {
  FakeEngineOptions eo;
  eo.token_grid = 8;                     // 64 steps ...
  eo.step_time = absl::Milliseconds(1);  // ... long enough for B to join A
  FakeEngine engine(eo);
  SchedulerOptions o;
  engine.SetKvBudget(1 << 24);
  RecordingObserver observer;
  auto s = Make(engine, o, &observer);
  const int64_t need_a = KvNeed(engine, MakeRequest("aaaa", 2));
  const int64_t need_b = KvNeed(engine, MakeRequest("b", 1));
  std::shared_ptr<RequestHandle> a;
  std::atomic<int64_t> cancel_step{-1};
  observer.on_step = [&](const StepStats& st) {
    // On the loop thread, between steps: cancel A once both run.
    if (cancel_step.load() < 0 && st.kv_bytes_in_use == need_a + need_b && st.step_index >= 1) {
      cancel_step = st.step_index;
      a->Cancel();
    }
  };
  a = s->Submit(MakeRequest("aaaa", 2)).value();
  auto b = s->Submit(MakeRequest("b", 1)).value();
  const FinishedEvent* a_fin = nullptr;
  auto a_events = CollectEvents(*a);
  a_fin = FindFinished(a_events);
  ASSERT_NE(a_fin, nullptr);
  EXPECT_EQ(a_fin->status.code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(FindFinished(CollectEvents(*b))->status.ok());
  ASSERT_GE(cancel_step.load(), 0);
  bool saw_next = false;
  for (const StepStats& st : observer.steps()) {
    if (st.step_index == cancel_step.load() + 1) {
      saw_next = true;
      EXPECT_EQ(st.kv_bytes_in_use, need_b);  // A's KV gone by the very next step
    }
  }
  EXPECT_TRUE(saw_next);
  EXPECT_LE(a_fin->metrics.steps, cancel_step.load() + 1);
}

TEST(SchedulerTest, CancelWhileQueued) {
  FakeEngineOptions eo;
  eo.step_time = absl::Milliseconds(2);
  FakeEngine engine(eo);
  SchedulerOptions o;
  engine.SetKvBudget(KvNeed(engine, MakeRequest("a")));
  auto s = Make(engine, o);
  auto a = s->Submit(MakeRequest("a")).value();
  auto b = s->Submit(MakeRequest("b")).value();
  b->Cancel();
  auto b_fin_events = CollectEvents(*b);
  auto b_fin = FindFinished(b_fin_events);
  ASSERT_NE(b_fin, nullptr);
  EXPECT_EQ(b_fin->status.code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE(FindFinished(CollectEvents(*a))->status.ok());
  EXPECT_EQ(engine.added_prompts(), std::vector<std::string>{"a"});
}

TEST(SchedulerTest, DeadlineEndsARunningRequest) {
  FakeEngineOptions eo;
  eo.token_grid = 16;  // 256 steps of 1 ms
  eo.step_time = absl::Milliseconds(1);
  FakeEngine engine(eo);
  SchedulerOptions o;
  engine.SetKvBudget(1 << 24);
  auto s = Make(engine, o);
  SubmitOptions submit;
  submit.deadline = absl::Now() + absl::Milliseconds(30);
  auto h = s->Submit(MakeRequest("slow"), submit).value();
  auto fin_events = CollectEvents(*h);
  auto fin = FindFinished(fin_events);
  ASSERT_NE(fin, nullptr);
  EXPECT_EQ(fin->status.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_LT(fin->metrics.steps, 256);
  EXPECT_EQ(engine.KvBytesInUse(), 0);
}

TEST(SchedulerTest, QueueFullIsResourceExhausted) {
  FakeEngineOptions eo;
  eo.token_grid = 8;  // the running request lasts 64 x 2 ms while the queue fills
  eo.step_time = absl::Milliseconds(2);
  FakeEngine engine(eo);
  SchedulerOptions o;
  engine.SetKvBudget(KvNeed(engine, MakeRequest("a")));
  o.queue_limit = 2;
  auto s = Make(engine, o);
  auto a = s->Submit(MakeRequest("a")).value();
  ASSERT_TRUE(a->Next(absl::Seconds(5)).has_value());  // Queued
  ASSERT_TRUE(std::holds_alternative<StartedEvent>(*a->Next(absl::Seconds(5))));
  auto b = s->Submit(MakeRequest("b"));
  auto c = s->Submit(MakeRequest("c"));
  ASSERT_TRUE(b.ok() && c.ok());
  auto d = s->Submit(MakeRequest("d"));
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(d.status().message().find("queue_limit 2"), std::string::npos) << d.status();
  auto b_events = CollectEvents(**b);
  EXPECT_EQ(std::get<QueuedEvent>(b_events[0]).position, 0);
  auto c_events = CollectEvents(**c);
  EXPECT_EQ(std::get<QueuedEvent>(c_events[0]).position, 1);
}

TEST(SchedulerTest, NeverFitsIsRejectedAtSubmissionSayingWhy) {
  FakeEngine engine;
  SchedulerOptions o;
  engine.SetKvBudget(KvNeed(engine, MakeRequest("a", 2)) - 1);
  engine.SetMaxBatchRows(6);
  auto s = Make(engine, o);
  auto r = s->Submit(MakeRequest("a", 2));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string msg(r.status().message());
  EXPECT_NE(msg.find(std::to_string(KvNeed(engine, MakeRequest("a", 2)))), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(engine.info().kv_budget_bytes)), std::string::npos) << msg;
  EXPECT_NE(msg.find("kv_budget_bytes"), std::string::npos) << msg;

  engine.SetKvBudget(int64_t{1} << 40);
  auto s2 = Make(engine, o);
  auto rows = s2->Submit(MakeRequest("a", 4));  // 8 rows > 6
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(rows.status().message().find("max_batch_rows"), std::string::npos);
  // A sparse policy makes the same images fit a budget dense cannot.
  engine::GenerationRequest sparse_req = MakeRequest("a", 2);
  sparse_req.policy.kind = sparse::PolicyKind::kDiagonal;
  sparse_req.policy.sparsity = 0.75;
  engine.SetKvBudget(KvNeed(engine, MakeRequest("a", 2)) - 1);
  auto s3 = Make(engine, o);
  auto ok = s3->Submit(sparse_req);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_TRUE(FindFinished(CollectEvents(**ok))->status.ok());
}

TEST(SchedulerTest, InvalidFieldsAreInvalidArgumentNamingTheField) {
  FakeEngine engine;
  SchedulerOptions o;
  engine.SetKvBudget(1 << 24);
  RecordingObserver observer;
  auto s = Make(engine, o, &observer);
  engine::GenerationRequest r = MakeRequest("x");
  r.sampling.temperature = -1;  // 0 is greedy, valid
  auto bad = s->Submit(r);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("temperature"), std::string::npos);
  r = MakeRequest("x");
  r.policy.kind = sparse::PolicyKind::kDiagonal;
  r.policy.sparsity = 1.5;
  bad = s->Submit(r);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("sparsity"), std::string::npos);
  EXPECT_EQ(observer.done_codes(),
            (std::vector<absl::StatusCode>{absl::StatusCode::kInvalidArgument, absl::StatusCode::kInvalidArgument}));
}

TEST(SchedulerTest, DrainFinishesAcceptedWorkAndRefusesNew) {
  FakeEngineOptions eo;
  eo.step_time = absl::Microseconds(500);
  FakeEngine engine(eo);
  SchedulerOptions o;
  engine.SetKvBudget(KvNeed(engine, MakeRequest("a")));
  auto s = Make(engine, o);
  std::vector<std::shared_ptr<RequestHandle>> handles;
  for (const char* p : {"a", "b", "c"}) handles.push_back(s->Submit(MakeRequest(p)).value());
  std::atomic<bool> drained{false};
  std::thread drainer([&] { drained = s->Drain(absl::Seconds(30)); });
  while (!s->snapshot().draining) absl::SleepFor(absl::Microseconds(100));
  auto refused = s->Submit(MakeRequest("late"));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  for (auto& h : handles) EXPECT_TRUE(FindFinished(CollectEvents(*h))->status.ok());
  drainer.join();
  EXPECT_TRUE(drained.load());
  EXPECT_EQ(engine.added_prompts().size(), 3u);
}

TEST(SchedulerTest, DrainTimeoutEndsLeftoversAsUnavailable) {
  FakeEngineOptions eo;
  eo.token_grid = 16;
  eo.step_time = absl::Milliseconds(2);
  FakeEngine engine(eo);
  SchedulerOptions o;
  engine.SetKvBudget(KvNeed(engine, MakeRequest("a")));
  auto s = Make(engine, o);
  auto a = s->Submit(MakeRequest("a")).value();
  auto b = s->Submit(MakeRequest("b")).value();
  EXPECT_FALSE(s->Drain(absl::Milliseconds(20)));
  EXPECT_EQ(FindFinished(CollectEvents(*a))->status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(FindFinished(CollectEvents(*b))->status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(engine.KvBytesInUse(), 0);
}

TEST(SchedulerTest, EngineStepFailureEndsThatBatchOnly) {
  FakeEngineOptions eo;
  eo.fail_step = 2;
  eo.step_time = absl::Microseconds(300);
  FakeEngine engine(eo);
  SchedulerOptions o;
  engine.SetKvBudget(KvNeed(engine, MakeRequest("a")));
  auto s = Make(engine, o);
  auto a = s->Submit(MakeRequest("a")).value();
  auto b = s->Submit(MakeRequest("b")).value();
  auto a_fin_events = CollectEvents(*a);
  auto a_fin = FindFinished(a_fin_events);
  EXPECT_EQ(a_fin->status.code(), absl::StatusCode::kInternal);
  EXPECT_NE(a_fin->status.message().find("injected"), std::string::npos);
  EXPECT_TRUE(FindFinished(CollectEvents(*b))->status.ok());
}

TEST(SchedulerTest, ImageDecodingDoesNotStallTheDecodeLoop) {
  FakeEngineOptions eo;
  eo.decode_time = absl::Milliseconds(300);
  FakeEngine engine(eo);
  SchedulerOptions o;
  engine.SetKvBudget(KvNeed(engine, MakeRequest("a")));  // one at a time
  auto s = Make(engine, o);
  auto a = s->Submit(MakeRequest("a")).value();
  auto b = s->Submit(MakeRequest("b")).value();
  // B runs all its steps while A's image is still being decoded.
  auto b_events = CollectEvents(*b);
  absl::Time b_done = absl::Now();
  auto a_events = CollectEvents(*a);
  absl::Time a_done = absl::Now();
  auto a_fin = FindFinished(a_events);
  auto b_fin = FindFinished(b_events);
  ASSERT_TRUE(a_fin && b_fin && a_fin->status.ok() && b_fin->status.ok());
  EXPECT_LT(b_fin->metrics.queue_wait, absl::Milliseconds(200));
  EXPECT_GE(a_fin->metrics.vq_decode, absl::Milliseconds(300));
  (void)b_done;
  (void)a_done;
}

TEST(SchedulerTest, CreateRejectsBadOptions) {
  FakeEngine engine;
  SchedulerOptions o;
  engine.SetKvBudget(0);  // the engine's limits: the scheduler refuses a zero budget
  auto s = Scheduler::Create(&engine, o, RawEncoder, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("kv_budget_bytes"), std::string::npos);
  engine.SetKvBudget(1);
  o.queue_limit = 0;
  s = Scheduler::Create(&engine, o, RawEncoder, nullptr);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("queue_limit"), std::string::npos);
}

}  // namespace
}  // namespace argen::scheduler
