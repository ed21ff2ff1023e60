// One KV ledger: admission places exactly what it reserves, on the real CPU
// engine (tests/goldens/tiny/tiny-mha) under a small budget.
//   * Engine level, randomised Prepare / CanAdd / Add / Remove / Step
//     sequences: Add succeeds exactly when CanAdd said so (a refused Add
//     places nothing), and the bytes in use are exactly the placed requests'
//     own_kv_bytes plus the prompts they share.
//   Both with prompt-KV sharing within requests and across them (the random
//   captions repeat, and every guidance prompt of one length is shared).
//   * Scheduler level, randomised submissions and cancels of mixed policies
//     and sizes: at every step the scheduler's reservation equals the
//     engine's bytes in use and stays within the budget, and no request ends
//     with "engine refused an admitted request" (the requeue path is gone).
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <thread>

#include "engine/engine.h"
#include "scheduler/scheduler.h"
#include "scheduler/tests/scheduler_test_util.h"
#include "tests/serving/serving_test_util.h"

namespace argen::serving_test {
namespace {

std::string TinyModel() { return SourceDir() + "/tests/goldens/tiny/tiny-mha"; }

engine::GenerationRequest RandomRequest(std::mt19937& rng, int i) {
  static const std::pair<sparse::PolicyKind, double> kPolicies[] = {
      {sparse::PolicyKind::kDense, 0.0},         {sparse::PolicyKind::kDiagonal, 0.75},
      {sparse::PolicyKind::kH2O, 0.5},           {sparse::PolicyKind::kSlidingWindow, 0.8},
      {sparse::PolicyKind::kDiagonalSink4, 0.5}, {sparse::PolicyKind::kTova, 0.5}};
  engine::GenerationRequest r;
  r.prompt = std::string(1 + rng() % 30, static_cast<char>('a' + i % 26));
  r.num_images = 1 + static_cast<int32_t>(rng() % 3);
  r.sampling.seed = rng();
  const auto& [kind, sparsity] = kPolicies[rng() % std::size(kPolicies)];
  r.policy.kind = kind;
  r.policy.sparsity = sparsity;
  return r;
}

std::unique_ptr<engine::Engine> TinyEngine(int64_t budget, bool across_requests = false) {
  engine::EngineOptions o;
  o.share_prompt_kv_across_requests = across_requests;
  o.model_dir = TinyModel();
  o.threads = 1;
  o.kv_budget_bytes = budget;
  o.max_batch_rows = 64;
  absl::StatusOr<std::unique_ptr<engine::Engine>> e = engine::CreateEngine(o);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *std::move(e) : nullptr;
}

// One dense 3-image request of a long prompt: the budgets below are multiples of it.
int64_t LargestNeed() {
  std::unique_ptr<engine::Engine> e = TinyEngine(0);
  engine::GenerationRequest r;
  r.prompt = std::string(30, 'a');
  r.num_images = 3;
  return e->Prepare(r).value().kv_bytes;
}

class KvLedgerTest : public ::testing::TestWithParam<bool> {};  // sharing across requests

TEST_P(KvLedgerTest, EngineAddsExactlyWhatCanAddSays) {
  const int64_t budget = 2 * LargestNeed() + 1000;
  std::unique_ptr<engine::Engine> engine = TinyEngine(budget, GetParam());
  ASSERT_NE(engine, nullptr);
  ASSERT_EQ(engine->info().kv_budget_bytes, budget);
  std::mt19937 rng(7);
  std::map<engine::GroupId, int64_t> live;  // group -> its own_kv_bytes
  int refused = 0;
  for (int op = 0; op < 300; ++op) {
    const int what = static_cast<int>(rng() % 4);
    if (what == 0 && !live.empty()) {
      auto it = std::next(live.begin(), static_cast<long>(rng() % live.size()));
      engine->Remove(it->first);
      live.erase(it);
    } else if (what == 1) {
      absl::StatusOr<engine::StepReport> step = engine->Step();
      ASSERT_TRUE(step.ok()) << step.status();
      for (engine::GroupId done : step->finished) {  // finished groups free their KV at once
        engine->Remove(done);
        live.erase(done);
      }
    } else {
      absl::StatusOr<engine::PreparedRequest> p = engine->Prepare(RandomRequest(rng, op));
      ASSERT_TRUE(p.ok()) << p.status();
      const bool can = engine->CanAdd(*p);
      const int64_t before = engine->KvBytesInUse();
      absl::StatusOr<engine::GroupId> id = engine->Add(*p);
      ASSERT_EQ(can, id.ok()) << "CanAdd " << can << " but Add: " << id.status();
      if (id.ok()) {
        live[*id] = p->own_kv_bytes;
        EXPECT_LE(engine->KvBytesInUse() - before, p->kv_bytes);
      } else {
        EXPECT_EQ(id.status().code(), absl::StatusCode::kResourceExhausted) << id.status();
        EXPECT_EQ(engine->KvBytesInUse(), before) << "a refused Add left rows behind";
        ++refused;
      }
    }
    int64_t placed = engine->SharedKvBytes();
    for (const auto& [id, bytes] : live) placed += bytes;
    ASSERT_EQ(engine->KvBytesInUse(), placed);
    ASSERT_LE(placed, budget);
  }
  EXPECT_GT(refused, 0) << "the pool never filled";
  for (const auto& [id, bytes] : live) engine->Remove(id);
  EXPECT_EQ(engine->KvBytesInUse(), 0);
  EXPECT_EQ(engine->SharedKvBytes(), 0);
}

TEST_P(KvLedgerTest, SchedulerReservationIsTheEnginesPlacement) {
  const int64_t budget = 2 * LargestNeed() + LargestNeed() / 2;
  std::unique_ptr<engine::Engine> engine = TinyEngine(budget, GetParam());
  ASSERT_NE(engine, nullptr);
  scheduler::testing::RecordingObserver observer;
  scheduler::SchedulerOptions options;
  options.queue_limit = 64;
  absl::StatusOr<std::unique_ptr<scheduler::Scheduler>> sched =
      scheduler::Scheduler::Create(engine.get(), options, scheduler::testing::RawEncoder, &observer);
  ASSERT_TRUE(sched.ok()) << sched.status();
  std::mt19937 rng(11);
  std::vector<std::shared_ptr<scheduler::RequestHandle>> handles;
  for (int i = 0; i < 24; ++i) {
    absl::StatusOr<std::shared_ptr<scheduler::RequestHandle>> h = (*sched)->Submit(RandomRequest(rng, i));
    ASSERT_TRUE(h.ok()) << h.status();
    handles.push_back(*h);
    if (rng() % 4 == 0) handles[rng() % handles.size()]->Cancel();
    std::this_thread::sleep_for(std::chrono::microseconds(rng() % 3000));
  }
  int ok = 0;
  for (auto& h : handles) {
    const std::vector<scheduler::RequestEvent> events = scheduler::testing::CollectEvents(*h);
    const scheduler::FinishedEvent* fin = scheduler::testing::FindFinished(events);
    ASSERT_NE(fin, nullptr);
    EXPECT_TRUE(fin->status.ok() || fin->status.code() == absl::StatusCode::kCancelled) << fin->status;
    ok += fin->status.ok();
  }
  EXPECT_GT(ok, 0);
  const std::vector<scheduler::StepStats> steps = observer.steps();
  ASSERT_FALSE(steps.empty());
  for (const scheduler::StepStats& st : steps) {
    ASSERT_EQ(st.kv_bytes_reserved, st.kv_bytes_in_use) << "step " << st.step_index;
    ASSERT_LE(st.kv_bytes_in_use, budget);
  }
  EXPECT_EQ(engine->KvBytesInUse(), 0);
}

INSTANTIATE_TEST_SUITE_P(PromptSharing, KvLedgerTest, ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "AcrossRequests" : "WithinRequests";
                         });

}  // namespace
}  // namespace argen::serving_test
