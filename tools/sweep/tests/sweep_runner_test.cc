// RunSweep's batching loop against a fake engine: every request runs once
// with its paired seed, the running rows never exceed --max-batch-rows, a
// full KV pool (Add: ResourceExhausted) makes requests wait instead of
// failing, and engine errors (KV too small for one request, decode failure)
// stop the sweep with that error, naming the request.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tools/sweep/image_sink.h"
#include "tools/sweep/manifest.h"
#include "tools/sweep/sweep_runner.h"

namespace argen::sweep {
namespace {

namespace fs = std::filesystem;

// Groups of 2 x num_images rows; each Step adds one token to every group; a
// group finishes after kTokens tokens. Rows beyond kv_rows: ResourceExhausted.
class FakeEngine final : public engine::Engine {
 public:
  static constexpr int32_t kTokens = 4;
  explicit FakeEngine(int32_t kv_rows) : kv_rows_(kv_rows) {
    info_.name = "fake";
    info_.image_tokens = kTokens;
  }
  const engine::ModelInfo& info() const override { return info_; }
  absl::StatusOr<engine::PreparedRequest> Prepare(const engine::GenerationRequest& r) const override {
    engine::PreparedRequest p;
    p.request = r;
    if (!ignore_kv_format) p.policy.kv_format = r.policy.kv_format;
    return p;
  }
  bool CanAdd(const engine::PreparedRequest& p) const override { return rows_ + 2 * p.request.num_images <= kv_rows_; }
  using engine::Engine::Add;
  absl::StatusOr<engine::GroupId> Add(engine::RequestPtr r) override {
    const engine::PreparedRequest& p = r->prepared;
    const int32_t rows = 2 * p.request.num_images;
    if (!CanAdd(p)) return absl::ResourceExhaustedError("fake KV pool full");
    rows_ += rows;
    r->progress = {};
    groups_[next_] = {p.request, 0, false, r};
    seeds.push_back(p.request.sampling.seed);
    kv_formats.push_back(p.policy.kv_format);
    return next_++;
  }
  absl::StatusOr<engine::StepReport> Step() override {
    if (step_delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(step_delay_us));
    peak_rows = std::max(peak_rows, rows_);
    engine::StepReport report;
    for (auto& [id, g] : groups_) {
      if (g.finished) continue;
      engine::RequestProgress& progress = g.object->progress;
      progress.tokens_done = ++g.tokens;
      if (g.tokens == kTokens) {
        g.finished = true;
        progress.finished = true;
        progress.tokens.assign(g.request.num_images, std::vector<int32_t>(g.tokens, 1));
        rows_ -= 2 * g.request.num_images;
        report.finished.push_back(id);
      }
    }
    return report;
  }
  void Remove(engine::GroupId id) override { groups_.erase(id); }
  absl::StatusOr<engine::GroupState> State(engine::GroupId id) const override {
    const Group& g = groups_.at(id);
    engine::GroupState s;
    s.tokens_done = g.tokens;
    s.tokens_total = kTokens;
    s.finished = g.finished;
    s.tokens.assign(g.request.num_images, std::vector<int32_t>(g.tokens, 1));
    return s;
  }
  int64_t KvBytesInUse() const override { return rows_; }
  int32_t RunningRows() const override { return rows_; }
  absl::StatusOr<std::vector<engine::RgbImage>> DecodeImages(const std::vector<std::vector<int32_t>>& grids) override {
    if (fail_decode) return absl::InternalError("fake decoder failed");
    const int now = ++concurrent_decodes_;
    for (int seen = max_concurrent_decodes.load();
         now > seen && !max_concurrent_decodes.compare_exchange_weak(seen, now);) {
    }
    // Later calls sleep less, so concurrent workers finish out of order.
    if (decode_delay_us > 0) {
      std::this_thread::sleep_for(std::chrono::microseconds(decode_delay_us / (1 + decode_calls_++ % 3)));
    }
    --concurrent_decodes_;
    engine::RgbImage img;
    img.width = img.height = 2;
    img.rgb.assign(12, 128);
    return std::vector<engine::RgbImage>(grids.size(), img);
  }

  std::vector<uint64_t> seeds;
  std::vector<sparse::KvFormat> kv_formats;  // as resolved, per Add
  bool ignore_kv_format = false;             // resolve every request to auto (an engine without fp8)
  int32_t peak_rows = 0;
  bool fail_decode = false;
  int decode_delay_us = 0, step_delay_us = 0;
  std::atomic<int> max_concurrent_decodes{0};

 private:
  struct Group {
    engine::GenerationRequest request;
    int32_t tokens = 0;
    bool finished = false;
    engine::RequestPtr object;  // its progress is written at each Step
  };
  engine::ModelInfo info_;
  int32_t kv_rows_;
  int32_t rows_ = 0;
  std::map<engine::GroupId, Group> groups_;
  engine::GroupId next_ = 1;
  std::atomic<int> concurrent_decodes_{0}, decode_calls_{0};
};

// The manifest's lines without their timing (decode_s), in file order.
std::vector<std::string> ManifestOrder(const fs::path& p) {
  std::vector<std::string> lines;
  absl::StatusOr<std::vector<ManifestEntry>> m = ReadManifest(p.string());
  if (!m.ok()) return {m.status().ToString()};
  for (ManifestEntry e : *m) {
    e.decode_s = 0;
    lines.push_back(ToJsonLine(e));
  }
  return lines;
}

class SweepRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    out_ = fs::temp_directory_path() / ("sweep_runner_test_" + std::to_string(getpid()));
    fs::remove_all(out_);
    for (int i = 0; i < 5; ++i) prompts_.push_back({10 * i, absl::StrCat("prompt ", i), "tag", "", ""});
    grid_ = BuildGrid({sparse::PolicyKind::kDense, sparse::PolicyKind::kDiagonal}, {90});
    for (const SweepConfig& c : grid_) {
      fs::create_directories(out_ / c.label);
      for (const BenchmarkPrompt& p : prompts_) items_.push_back({&c, &p});
    }
    settings_.out_dir = out_.string();
    settings_.images_per_prompt = 2;
    settings_.max_batch_rows = 12;  // 3 requests of 4 rows
    settings_.seed = 100;
  }
  void TearDown() override { fs::remove_all(out_); }

  absl::Status Run(FakeEngine& engine, SinkOptions sink_options = {}) {
    absl::StatusOr<SweepOutcome> outcome = RunWithOutcome(engine, sink_options);
    return outcome.ok() ? absl::OkStatus() : outcome.status();
  }
  absl::StatusOr<SweepOutcome> RunWithOutcome(FakeEngine& engine, SinkOptions sink_options = {}) {
    absl::StatusOr<std::unique_ptr<ManifestWriter>> manifest =
        ManifestWriter::Open((out_ / "manifest.jsonl").string(), false);
    if (!manifest.ok()) return manifest.status();
    absl::StatusOr<SweepOutcome> outcome = RunSweep(engine, items_, settings_, sink_options, **manifest);
    if (outcome.ok()) peak_queued_ = outcome->peak_queued;
    return outcome;
  }

  fs::path out_;
  std::vector<BenchmarkPrompt> prompts_;
  std::vector<SweepConfig> grid_;
  std::vector<WorkItem> items_;
  RunSettings settings_;
  int64_t peak_queued_ = 0;
};

TEST_F(SweepRunnerTest, RunsEveryRequestOnceWithinTheBatchLimit) {
  FakeEngine engine(/*kv_rows=*/1000);
  ASSERT_TRUE(Run(engine).ok());
  EXPECT_EQ(engine.peak_rows, 12);
  ASSERT_EQ(engine.seeds.size(), 10u);
  for (size_t i = 0; i < engine.seeds.size(); ++i) EXPECT_EQ(engine.seeds[i], 100u + 10 * (i % 5)) << i;
  absl::StatusOr<std::vector<ManifestEntry>> m = ReadManifest((out_ / "manifest.jsonl").string());
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->size(), 20u);  // 2 configurations x 5 prompts x 2 images
  for (const ManifestEntry& e : *m) {
    EXPECT_TRUE(fs::is_regular_file(out_ / e.path)) << e.path;
    EXPECT_EQ(e.seed, 100u + e.prompt_index);
  }
}

TEST_F(SweepRunnerTest, AFullKvPoolMakesRequestsWait) {
  FakeEngine engine(/*kv_rows=*/8);  // 2 requests fit, the batch limit would allow 3
  ASSERT_TRUE(Run(engine).ok());
  EXPECT_EQ(engine.peak_rows, 8);
  EXPECT_EQ(engine.seeds.size(), 10u);
}

TEST_F(SweepRunnerTest, AWriterPoolKeepsTheManifestInFinishingOrder) {
  // One writer, then four writers decoding one group or three at a time: the
  // same manifest lines in the same order (Submit order), every PNG written.
  FakeEngine serial_engine(/*kv_rows=*/1000);
  ASSERT_TRUE(Run(serial_engine, {.threads = 1, .decode_batch = 1, .png = {}}).ok());
  const std::vector<std::string> serial = ManifestOrder(out_ / "manifest.jsonl");
  for (int32_t batch : {1, 3}) {
    FakeEngine engine(/*kv_rows=*/1000);
    engine.decode_delay_us = 300;  // workers overlap and finish out of order
    ASSERT_TRUE(Run(engine, {.threads = 4, .decode_batch = batch, .png = {}}).ok());
    EXPECT_EQ(ManifestOrder(out_ / "manifest.jsonl"), serial) << "decode batch " << batch;
    EXPECT_GE(engine.max_concurrent_decodes, 1);
  }
  absl::StatusOr<std::vector<ManifestEntry>> m = ReadManifest((out_ / "manifest.jsonl").string());
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->size(), 20u);
  for (const ManifestEntry& e : *m) EXPECT_TRUE(fs::is_regular_file(out_ / e.path)) << e.path;
}

TEST_F(SweepRunnerTest, ASlowWriterBlocksTheEngineInsteadOfQueueing) {
  FakeEngine engine(/*kv_rows=*/1000);
  engine.decode_delay_us = 2000;
  ASSERT_TRUE(Run(engine, {.threads = 1, .max_queued = 2, .decode_batch = 1, .png = {}}).ok());
  EXPECT_LE(peak_queued_, 2);
  absl::StatusOr<std::vector<ManifestEntry>> m = ReadManifest((out_ / "manifest.jsonl").string());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->size(), 20u);
}

TEST_F(SweepRunnerTest, ADeadlineStopsAdmittingAndFinishesWhatRuns) {
  // A deadline already past: nothing is admitted, nothing is left half done.
  FakeEngine idle(/*kv_rows=*/1000);
  settings_.deadline = std::chrono::steady_clock::now();
  absl::StatusOr<SweepOutcome> outcome = RunWithOutcome(idle);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->finished, 0);
  EXPECT_EQ(outcome->left, 10);
  EXPECT_TRUE(idle.seeds.empty());

  // A deadline during the run: every admitted request finishes and is written.
  FakeEngine engine(/*kv_rows=*/1000);
  engine.step_delay_us = 10000;  // 4 steps a request: 3 requests at a time finish every >= 40 ms
  settings_.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
  outcome = RunWithOutcome(engine);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_GT(outcome->finished, 0);
  EXPECT_GT(outcome->left, 0);
  EXPECT_EQ(outcome->finished + outcome->left, 10);
  EXPECT_EQ(static_cast<int64_t>(engine.seeds.size()), outcome->finished);  // all admitted ones finished
  absl::StatusOr<std::vector<ManifestEntry>> m = ReadManifest((out_ / "manifest.jsonl").string());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(static_cast<int64_t>(m->size()), 2 * outcome->finished);
}

TEST_F(SweepRunnerTest, EngineErrorsStopTheSweep) {
  FakeEngine too_small(/*kv_rows=*/2);  // not even one request of 2 images
  absl::Status s = Run(too_small);
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_NE(s.message().find("dense_0, prompt 0: "), std::string::npos) << s;  // the request it concerns

  FakeEngine failing(/*kv_rows=*/1000);
  failing.fail_decode = true;
  s = Run(failing);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("fake decoder failed"), std::string::npos) << s;
}

// --kv-cache-dtype: every request of every configuration is admitted with
// the format asked for; an engine that resolves another one stops the sweep
// at the first such request, before its first step: no image is written.
TEST_F(SweepRunnerTest, EveryRequestRunsWithTheKvFormatAskedFor) {
  settings_.kv_format = sparse::KvFormat::kFp8E4m3;
  FakeEngine engine(64);
  ASSERT_TRUE(Run(engine).ok());
  ASSERT_EQ(engine.kv_formats.size(), items_.size());
  for (sparse::KvFormat f : engine.kv_formats) EXPECT_EQ(f, sparse::KvFormat::kFp8E4m3);

  fs::remove_all(out_);
  for (const SweepConfig& c : grid_) fs::create_directories(out_ / c.label);
  FakeEngine plain(64);
  plain.ignore_kv_format = true;
  const absl::Status s = Run(plain);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("kv_cache_dtype auto, not fp8"), std::string::npos) << s;
  EXPECT_EQ(plain.kv_formats.size(), 1u);  // stopped at the first, before its prefill step
  EXPECT_TRUE(ManifestOrder(out_ / "manifest.jsonl").empty());
}

}  // namespace
}  // namespace argen::sweep
