// RunJobs against a small fake engine: the row and KV caps are never
// exceeded, jobs join as rows free (no idle step while one waits), every job
// is handed over exactly once with its own tokens and images, completion is
// FIFO for equal-length jobs, errors stop the run with the job's tag and leave
// no group behind, and the deadline / stop flag stop admission while admitted
// jobs finish.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tools/runner/batch_runner.h"

namespace argen::runner {
namespace {

// Groups of 2 x num_images rows; every Step adds one token to every group; a
// group finishes after kTokens. Rows are held from Add to Remove; more than
// pool_rows at once: Add says ResourceExhausted. Prompt "bad": Prepare fails.
class FakeEngine final : public engine::Engine {
 public:
  static constexpr int32_t kTokens = 3;
  static constexpr int64_t kKvBytesPerRow = 100;
  explicit FakeEngine(int32_t pool_rows = 1000) : pool_rows_(pool_rows) {
    info_.name = "fake";
    info_.image_tokens = kTokens;
  }
  const engine::ModelInfo& info() const override { return info_; }
  absl::StatusOr<engine::PreparedRequest> Prepare(const engine::GenerationRequest& r) const override {
    if (r.prompt == "bad") return absl::InvalidArgumentError("prompt: bad");
    engine::PreparedRequest p;
    p.request = r;
    p.kv_bytes = 2 * r.num_images * kKvBytesPerRow;
    p.own_kv_bytes = p.kv_bytes;
    return p;
  }
  bool CanAdd(const engine::PreparedRequest& p) const override {
    return rows_ + 2 * p.request.num_images <= pool_rows_;
  }
  using engine::Engine::Add;
  absl::StatusOr<engine::GroupId> Add(engine::RequestPtr r) override {
    CheckThread();
    const engine::PreparedRequest& p = r->prepared;
    const int32_t rows = 2 * p.request.num_images;
    if (rows_ + rows > pool_rows_) return absl::ResourceExhaustedError("fake KV pool full");
    rows_ += rows;
    r->progress = {};
    groups_[next_] = {p, 0, false, r};
    added_prompts.push_back(p.request.prompt);
    return next_++;
  }
  absl::StatusOr<engine::StepReport> Step() override {
    CheckThread();
    if (steps == fail_step) return absl::InternalError("fake step failed");
    ++steps;
    peak_rows = std::max(peak_rows, rows_);
    if (step_delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(step_delay_us));
    engine::StepReport report;
    int32_t active = 0;
    for (auto& [id, g] : groups_) {
      if (g.finished) continue;
      ++active;
      engine::RequestProgress& progress = g.request->progress;
      progress.tokens_done = ++g.tokens;
      if (g.tokens == kTokens) {
        g.finished = true;
        progress.finished = true;
        for (int32_t i = 0; i < g.prepared.request.num_images; ++i) {
          progress.tokens.push_back(ExpectedTokens(g.prepared.request.sampling.seed, i));
        }
        report.finished.push_back(id);
      }
    }
    max_groups_in_step = std::max(max_groups_in_step, active);
    return report;
  }
  void Remove(engine::GroupId id) override {
    CheckThread();
    auto it = groups_.find(id);
    if (it == groups_.end()) return;
    rows_ -= 2 * it->second.prepared.request.num_images;
    groups_.erase(it);
  }
  absl::StatusOr<engine::GroupState> State(engine::GroupId id) const override {
    CheckThread();
    auto it = groups_.find(id);
    if (it == groups_.end()) return absl::NotFoundError("no such group");
    const Group& g = it->second;
    engine::GroupState s;
    s.tokens_done = g.tokens;
    s.tokens_total = kTokens;
    s.finished = g.finished;
    for (int32_t i = 0; i < g.prepared.request.num_images; ++i) {
      s.tokens.push_back(ExpectedTokens(g.prepared.request.sampling.seed, i));
    }
    return s;
  }
  int64_t KvBytesInUse() const override { return rows_ * kKvBytesPerRow; }
  int32_t RunningRows() const override { return rows_; }
  absl::StatusOr<std::vector<engine::RgbImage>> DecodeImages(const std::vector<std::vector<int32_t>>& grids) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      decode_call_sizes.push_back(static_cast<int32_t>(grids.size()));
    }
    if (decode_delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(decode_delay_us));
    if (fail_decode) return absl::InternalError("fake decoder failed");
    std::vector<engine::RgbImage> images;
    for (const std::vector<int32_t>& g : grids) {
      engine::RgbImage img;
      img.width = img.height = 1;
      img.rgb = {static_cast<uint8_t>(g[0]), static_cast<uint8_t>(g[1]), static_cast<uint8_t>(g[2])};
      images.push_back(img);
    }
    return images;
  }

  static std::vector<int32_t> ExpectedTokens(uint64_t seed, int32_t image) {
    std::vector<int32_t> t;
    for (int32_t i = 0; i < kTokens; ++i) t.push_back(static_cast<int32_t>(seed * 7 + image * 3 + i) % 251);
    return t;
  }
  size_t groups_left() const { return groups_.size(); }
  bool used_from_one_thread() const { return one_thread_; }

  std::vector<std::string> added_prompts;
  int32_t peak_rows = 0, max_groups_in_step = 0;
  int64_t steps = 0, fail_step = -1;
  bool fail_decode = false;
  int decode_delay_us = 0, step_delay_us = 0;
  std::vector<int32_t> decode_call_sizes;  // grids per DecodeImages call

 private:
  struct Group {
    engine::PreparedRequest prepared;
    int32_t tokens = 0;
    bool finished = false;
    engine::RequestPtr request;  // its progress is written at each Step
  };
  void CheckThread() const {
    if (thread_ == std::thread::id()) thread_ = std::this_thread::get_id();
    if (thread_ != std::this_thread::get_id()) one_thread_ = false;
  }
  engine::ModelInfo info_;
  int32_t pool_rows_;
  int32_t rows_ = 0;
  std::map<engine::GroupId, Group> groups_;
  engine::GroupId next_ = 1;
  std::mutex mu_;
  mutable std::thread::id thread_;
  mutable bool one_thread_ = true;
};

// Job i: prompt "job i", seed 100 + i, images[i % images.size()] images, tag 1000 + i.
std::vector<Job> MakeJobs(int32_t n, std::vector<int32_t> images = {1}) {
  std::vector<Job> jobs;
  for (int32_t i = 0; i < n; ++i) {
    Job j;
    j.request.prompt = absl::StrCat("job ", i);
    j.request.num_images = images[i % images.size()];
    j.request.sampling.seed = 100 + i;
    j.tag = 1000 + i;
    jobs.push_back(j);
  }
  return jobs;
}

// What on_finished saw (thread-safe: workers call it concurrently).
struct Collected {
  std::mutex mu;
  std::vector<FinishedJob> jobs;  // in call order
  RunHooks Hooks() {
    RunHooks h;
    h.on_finished = [this](FinishedJob j) {
      std::lock_guard<std::mutex> lock(mu);
      jobs.push_back(std::move(j));
      return absl::OkStatus();
    };
    return h;
  }
  std::vector<int64_t> TagsBySequence() {
    std::vector<FinishedJob*> by_seq;
    for (FinishedJob& j : jobs) by_seq.push_back(&j);
    std::sort(by_seq.begin(), by_seq.end(), [](auto* a, auto* b) { return a->sequence < b->sequence; });
    std::vector<int64_t> tags;
    for (FinishedJob* j : by_seq) tags.push_back(j->tag);
    return tags;
  }
};

TEST(BatchRunnerTest, EveryJobIsHandedOverOnceWithItsTokensAndImages) {
  const std::vector<Job> jobs = MakeJobs(7, {1, 3, 2});
  for (int32_t workers : {0, 3}) {
    for (bool decode : {false, true}) {
      SCOPED_TRACE(absl::StrCat("workers ", workers, " decode ", decode));
      FakeEngine engine;
      Collected seen;
      RunOptions o;
      o.max_rows = 8;
      o.worker_threads = workers;
      o.decode_images = decode;
      o.decode_batch = 2;
      const RunResult r = RunJobs(engine, jobs, o, seen.Hooks());
      ASSERT_TRUE(r.status.ok()) << r.status;
      EXPECT_EQ(r.admitted, 7);
      EXPECT_EQ(r.finished, 7);
      EXPECT_EQ(r.not_admitted, 0);
      ASSERT_EQ(seen.jobs.size(), 7u);
      std::set<int64_t> tags, sequences;
      for (const FinishedJob& f : seen.jobs) {
        tags.insert(f.tag);
        sequences.insert(f.sequence);
        const Job& job = jobs[f.tag - 1000];
        ASSERT_EQ(f.tokens.size(), static_cast<size_t>(job.request.num_images));
        for (int32_t i = 0; i < job.request.num_images; ++i) {
          EXPECT_EQ(f.tokens[i], FakeEngine::ExpectedTokens(job.request.sampling.seed, i)) << f.tag;
        }
        ASSERT_EQ(f.images.size(), decode ? f.tokens.size() : 0u);
        for (size_t i = 0; i < f.images.size(); ++i) {
          EXPECT_EQ(f.images[i].rgb[0], f.tokens[i][0]) << "image " << i << " of job " << f.tag;
        }
        EXPECT_GE(f.seconds, 0.0);
      }
      EXPECT_EQ(tags.size(), 7u);
      EXPECT_EQ(*sequences.begin(), 0);
      EXPECT_EQ(*sequences.rbegin(), 6);
      EXPECT_EQ(sequences.size(), 7u);
      EXPECT_EQ(engine.groups_left(), 0u);
      EXPECT_TRUE(engine.used_from_one_thread());
      if (decode) {
        for (int32_t n : engine.decode_call_sizes) EXPECT_LE(n, 2 * 3) << "at most 2 jobs of <= 3 images a call";
      } else {
        EXPECT_TRUE(engine.decode_call_sizes.empty());
      }
    }
  }
}

TEST(BatchRunnerTest, TheRowCapIsNeverExceededAndJobsJoinAsRowsFree) {
  // 1, 2 or 3 images (2, 4, 6 rows) under a cap of 8 rows.
  const std::vector<Job> jobs = MakeJobs(12, {1, 2, 3});
  FakeEngine engine;
  Collected seen;
  RunOptions o;
  o.max_rows = 8;
  int64_t idle_room_steps = 0;  // steps taken while the next job would have fitted
  size_t admitted = 0;
  RunHooks hooks = seen.Hooks();
  hooks.on_admitted = [&](const Job&, const engine::PreparedRequest&) {
    ++admitted;
    return absl::OkStatus();
  };
  hooks.on_step = [&](const engine::StepReport&) {
    // The fake holds rows until Remove, so these are the rows the step ran with.
    if (admitted < jobs.size() && engine.RunningRows() + 2 * jobs[admitted].request.num_images <= o.max_rows) {
      ++idle_room_steps;
    }
    return absl::OkStatus();
  };
  const RunResult r = RunJobs(engine, jobs, o, hooks);
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.finished, 12);
  EXPECT_LE(engine.peak_rows, 8);
  EXPECT_EQ(engine.peak_rows, 8);  // the batch did fill up
  EXPECT_GT(engine.max_groups_in_step, 1);
  EXPECT_EQ(idle_room_steps, 0);
  // Admission is FIFO: Add order is job order.
  std::vector<std::string> want;
  for (const Job& j : jobs) want.push_back(j.request.prompt);
  EXPECT_EQ(engine.added_prompts, want);
}

TEST(BatchRunnerTest, EqualJobsCompleteInFifoOrder) {
  // Every job takes kTokens steps, so they finish in admission order; inline
  // calls come in that order, worker calls carry it in `sequence`.
  const std::vector<Job> jobs = MakeJobs(9);
  std::vector<int64_t> want;
  for (const Job& j : jobs) want.push_back(j.tag);
  for (int32_t workers : {0, 4}) {
    FakeEngine engine;
    Collected seen;
    RunOptions o;
    o.max_rows = 6;  // 3 jobs at a time
    o.worker_threads = workers;
    o.decode_images = true;
    const RunResult r = RunJobs(engine, jobs, o, seen.Hooks());
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(seen.TagsBySequence(), want) << "workers " << workers;
    if (workers == 0) {
      std::vector<int64_t> call_order;
      for (const FinishedJob& f : seen.jobs) call_order.push_back(f.tag);
      EXPECT_EQ(call_order, want);
    }
    // No idle step: 3 rounds of kTokens steps.
    EXPECT_EQ(engine.steps, 3 * FakeEngine::kTokens);
  }
}

TEST(BatchRunnerTest, TheKvCapAndAFullEnginePoolMakeJobsWait) {
  const std::vector<Job> jobs = MakeJobs(6, {2});  // 4 rows, 400 KV bytes each
  {
    FakeEngine engine;
    RunOptions o;
    o.max_rows = 16;
    o.max_kv_bytes = 800;  // 2 jobs, although the rows allow 4
    Collected seen;
    const RunResult r = RunJobs(engine, jobs, o, seen.Hooks());
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.finished, 6);
    EXPECT_EQ(engine.peak_rows, 8);
  }
  {
    FakeEngine engine(/*pool_rows=*/12);  // the engine's own pool: 3 jobs
    RunOptions o;
    o.max_rows = 16;
    Collected seen;
    const RunResult r = RunJobs(engine, jobs, o, seen.Hooks());
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.finished, 6);
    EXPECT_EQ(engine.peak_rows, 12);
  }
}

TEST(BatchRunnerTest, ErrorsStopTheRunWithTheJobsTagAndLeaveNoGroup) {
  struct Case {
    std::string name;
    std::function<void(std::vector<Job>&, FakeEngine&, RunOptions&, RunHooks&)> setup;
    absl::StatusCode code;
    std::optional<int64_t> tag;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"prepare", [](auto& jobs, auto&, auto&, auto&) { jobs[4].request.prompt = "bad"; },
       absl::StatusCode::kInvalidArgument, 1004, "prompt: bad"},
      {"too many rows for the cap", [](auto& jobs, auto&, auto&, auto&) { jobs[3].request.num_images = 5; },
       absl::StatusCode::kInvalidArgument, 1003, "the row cap is 4"},
      {"too many KV bytes for the cap", [](auto&, auto&, auto& o, auto&) { o.max_kv_bytes = 100; },
       absl::StatusCode::kResourceExhausted, 1000, "the KV cap is 100"},
      {"engine pool too small for one job",
       [](auto& jobs, auto&, auto& o, auto&) {
         jobs[2].request.num_images = 3;  // 6 rows, the pool has 4
         o.max_rows = 100;
       },
       absl::StatusCode::kResourceExhausted, 1002, "fake KV pool full"},
      {"step", [](auto&, auto& e, auto&, auto&) { e.fail_step = 5; }, absl::StatusCode::kInternal, std::nullopt,
       "fake step failed"},
      {"decode inline",
       [](auto&, auto& e, auto& o, auto&) {
         e.fail_decode = true;
         o.decode_images = true;
       },
       absl::StatusCode::kInternal, 1000, "fake decoder failed"},
      {"decode on workers",
       [](auto&, auto& e, auto& o, auto&) {
         e.fail_decode = true;
         o.decode_images = true;
         o.worker_threads = 1;  // the first call is the first job's
         o.decode_batch = 1;
       },
       absl::StatusCode::kInternal, 1000, "fake decoder failed"},
      {"on_finished",
       [](auto&, auto&, auto&, auto& h) {
         h.on_finished = [](FinishedJob j) {
           return j.tag == 1003 ? absl::DataLossError("disk full") : absl::OkStatus();
         };
       },
       absl::StatusCode::kDataLoss, 1003, "disk full"},
      {"on_admitted",
       [](auto&, auto&, auto&, auto& h) {
         h.on_admitted = [](const Job& j, const engine::PreparedRequest&) {
           return j.tag == 1005 ? absl::AbortedError("no") : absl::OkStatus();
         };
       },
       absl::StatusCode::kAborted, 1005, "no"},
      {"on_step",
       [](auto&, auto&, auto&, auto& h) {
         h.on_step = [n = 0](const engine::StepReport&) mutable {
           return ++n == 4 ? absl::CancelledError("enough") : absl::OkStatus();
         };
       },
       absl::StatusCode::kCancelled, std::nullopt, "enough"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::vector<Job> jobs = MakeJobs(8);
    FakeEngine engine(/*pool_rows=*/2 * 1 + 2);  // two 1-image jobs
    RunOptions o;
    o.max_rows = 4;
    RunHooks hooks;
    c.setup(jobs, engine, o, hooks);
    const RunResult r = RunJobs(engine, jobs, o, hooks);
    EXPECT_EQ(r.status.code(), c.code) << r.status;
    EXPECT_NE(r.status.message().find(c.message), std::string::npos) << r.status;
    EXPECT_EQ(r.failed_tag, c.tag);
    EXPECT_LT(r.finished, 8);
    EXPECT_EQ(r.admitted + r.not_admitted, 8);
    EXPECT_EQ(engine.groups_left(), 0u) << "a failed run removes its groups";
    EXPECT_EQ(engine.RunningRows(), 0);
  }
}

TEST(BatchRunnerTest, TheStopFlagAndTheDeadlineStopAdmissionAndRunningJobsFinish) {
  const std::vector<Job> jobs = MakeJobs(10);
  for (int32_t workers : {0, 2}) {
    SCOPED_TRACE(absl::StrCat("workers ", workers));
    FakeEngine engine;
    std::atomic<bool> stop{false};
    RunOptions o;
    o.max_rows = 6;
    o.stop = &stop;
    o.worker_threads = workers;
    Collected seen;
    RunHooks hooks = seen.Hooks();
    hooks.on_step = [&](const engine::StepReport&) {
      if (engine.steps == 4) stop = true;  // after the first 3 finished and 3 more joined
      return absl::OkStatus();
    };
    const RunResult r = RunJobs(engine, jobs, o, hooks);
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.admitted, 6);
    EXPECT_EQ(r.finished, 6);
    EXPECT_EQ(r.not_admitted, 4);
    EXPECT_EQ(seen.jobs.size(), 6u);
    EXPECT_EQ(engine.groups_left(), 0u);
  }
  {
    // A deadline already past: nothing is admitted, the engine never steps.
    FakeEngine engine;
    RunOptions o;
    o.deadline = std::chrono::steady_clock::now();
    const RunResult r = RunJobs(engine, jobs, o, {});
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.admitted, 0);
    EXPECT_EQ(r.not_admitted, 10);
    EXPECT_EQ(engine.steps, 0);
  }
  {
    // A deadline during the run: what was admitted finishes.
    FakeEngine engine;
    engine.step_delay_us = 5000;  // a round of 3 jobs takes >= 15 ms
    RunOptions o;
    o.max_rows = 6;
    o.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
    Collected seen;
    const RunResult r = RunJobs(engine, jobs, o, seen.Hooks());
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_GT(r.admitted, 0);
    EXPECT_GT(r.not_admitted, 0);
    EXPECT_EQ(r.admitted + r.not_admitted, 10);
    EXPECT_EQ(r.finished, r.admitted);
    EXPECT_EQ(static_cast<int64_t>(seen.jobs.size()), r.admitted);
  }
}

TEST(BatchRunnerTest, ASlowDecoderBlocksSteppingInsteadOfQueueing) {
  FakeEngine engine;
  engine.decode_delay_us = 2000;
  RunOptions o;
  o.max_rows = 8;
  o.decode_images = true;
  o.worker_threads = 1;
  o.decode_batch = 3;
  o.max_queued = 2;
  Collected seen;
  const RunResult r = RunJobs(engine, MakeJobs(16), o, seen.Hooks());
  ASSERT_TRUE(r.status.ok()) << r.status;
  EXPECT_EQ(r.finished, 16);
  EXPECT_LE(r.peak_queued, 2);
  EXPECT_GE(r.peak_queued, 1);
  int32_t grids = 0;
  for (int32_t n : engine.decode_call_sizes) {
    EXPECT_LE(n, 2);  // a worker takes what is queued: at most max_queued jobs of 1 image
    grids += n;
  }
  EXPECT_EQ(grids, 16);
}

TEST(BatchRunnerTest, NoJobsIsAnEmptyRun) {
  FakeEngine engine;
  const RunResult r = RunJobs(engine, {}, {}, {});
  EXPECT_TRUE(r.status.ok());
  EXPECT_EQ(r.finished, 0);
  EXPECT_EQ(engine.steps, 0);
}

}  // namespace
}  // namespace argen::runner
