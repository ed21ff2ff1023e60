// Previews (scheduler/preview.h): which rows each preview shows, the exact
// grid it decodes and its gray rows; on the fake engine: k previews per image
// in order before the final images, each rebuilt here from the final tokens
// byte for byte; dropped (and counted) when the client has not taken the last
// one or the image path is busy, while the decode loop keeps stepping.
#include "scheduler/preview.h"

#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <map>

#include "engine/token_vectors.h"
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

TEST(PreviewRowsTest, EvenlySpacedWholeRows) {
  EXPECT_EQ(PreviewRows(0, 24), std::vector<int32_t>{});
  EXPECT_EQ(PreviewRows(1, 24), std::vector<int32_t>{12});
  EXPECT_EQ(PreviewRows(2, 24), (std::vector<int32_t>{8, 16}));
  EXPECT_EQ(PreviewRows(3, 24), (std::vector<int32_t>{6, 12, 18}));
  EXPECT_EQ(PreviewRows(2, 8), (std::vector<int32_t>{2, 5}));
  EXPECT_EQ(PreviewRows(3, 4), (std::vector<int32_t>{1, 2, 3}));
}

TEST(PreviewGridTest, SampledRowsThenTheLastOneRepeated) {
  // 3 x 3 grid, 2 rows sampled (a third partly sampled row is ignored).
  const std::vector<int32_t> sampled = {1, 2, 3, 4, 5, 6, 7};
  EXPECT_EQ(PreviewGrid(sampled, 2, 3).value(), (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 4, 5, 6}));
  EXPECT_EQ(PreviewGrid(sampled, 1, 3).value(), (std::vector<int32_t>{1, 2, 3, 1, 2, 3, 1, 2, 3}));
  EXPECT_FALSE(PreviewGrid(sampled, 3, 3).ok());  // needs 9 tokens
  EXPECT_FALSE(PreviewGrid(sampled, 0, 3).ok());
}

// Lumina-mGPT's sequence: rows of 2 codes, each closed by a new line (9)
// except the last; the preview keeps the breaks where the decoder expects them.
TEST(PreviewTokensTest, RowsWithRowBreaksKeepTheBreaks) {
  const std::vector<int32_t> sampled = {1, 2, 9, 3, 4, 9, 5};
  absl::StatusOr<std::vector<int32_t>> one = PreviewTokens(sampled, 1, 2, 1, 3);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(*one, (std::vector<int32_t>{1, 2, 9, 1, 2, 9, 1, 2}));
  absl::StatusOr<std::vector<int32_t>> two = PreviewTokens(sampled, 2, 2, 1, 3);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(*two, (std::vector<int32_t>{1, 2, 9, 3, 4, 9, 3, 4}));
  EXPECT_FALSE(PreviewTokens({1, 2}, 1, 2, 1, 3).ok());  // row 0's break not sampled yet
  // Without breaks it is PreviewGrid.
  EXPECT_EQ(*PreviewTokens({1, 2, 3, 4}, 1, 2, 0, 2), *PreviewGrid({1, 2, 3, 4}, 1, 2));
}

// A continuous-token model's tokens: 2 words each, rows of 2 tokens; the rows
// made stay as sampled and every later word is 0.0f's bits (the neutral token).
TEST(PreviewTokenVectorsTest, MadeRowsThenNeutralTokens) {
  const std::vector<int32_t> sampled = {1, 2, 3, 4, 5, 6, 7, 8, 9};  // 2 rows and a word of the third
  absl::StatusOr<std::vector<int32_t>> one = PreviewTokenVectors(sampled, 1, 2, 3, 2);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(*one, (std::vector<int32_t>{1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0}));
  absl::StatusOr<std::vector<int32_t>> two = PreviewTokenVectors(sampled, 2, 2, 3, 2);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ(*two, (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 0}));
  EXPECT_EQ(std::bit_cast<int32_t>(engine::kNeutralTokenValue), 0);
  EXPECT_FALSE(PreviewTokenVectors(sampled, 3, 2, 3, 2).ok());  // row 2 not made yet
  EXPECT_FALSE(PreviewTokenVectors(sampled, 0, 2, 3, 2).ok());
  EXPECT_FALSE(PreviewTokenVectors(sampled, 1, 2, 3, 0).ok());
}

// A continuous-token model (no codes: image_vocab 0) may ask as many previews as a code model of its grid.
TEST(MaxPreviewsTest, ContinuousTokenModelsAsCodeModels) {
  engine::ModelInfo info;
  info.token_grid = 3;
  info.image_tokens = 9;
  info.image_size = 12;
  info.image_vocab = 64;
  const int32_t codes = MaxPreviews(info);
  info.image_vocab = 0;
  info.token_dim = 16;
  EXPECT_EQ(MaxPreviews(info), codes);
  EXPECT_EQ(codes, 2);
}

TEST(PaintUnsampledRowsTest, GraysPixelRowsBelowTheSampledTokenRows) {
  engine::RgbImage image;
  image.width = 2;
  image.height = 8;  // 4 token rows of 2 pixel rows
  image.rgb.assign(2 * 8 * 3, 7);
  PaintUnsampledRows(image, 1, 4);
  for (int y = 0; y < 8; ++y) {
    for (int b = 0; b < 6; ++b) EXPECT_EQ(image.rgb[y * 6 + b], y < 2 ? 7 : kPreviewGray) << y;
  }
}

// The bytes a preview must have: built here from the final tokens, without
// the scheduler's helpers.
std::string ExpectedPreview(FakeEngine& engine, uint64_t seed, int32_t image, int32_t rows) {
  const int32_t g = engine.info().token_grid;
  std::vector<int32_t> grid;
  for (int32_t r = 0; r < g; ++r) {
    const int32_t source_row = std::min(r, rows - 1);
    for (int32_t c = 0; c < g; ++c) grid.push_back(engine.ExpectedToken(seed, image, source_row * g + c));
  }
  engine::RgbImage rgb = engine.DecodeImages({grid}).value()[0];
  const int32_t first_gray = rows * rgb.height / g;
  for (int32_t y = first_gray; y < rgb.height; ++y) {
    for (int32_t x = 0; x < rgb.width * 3; ++x) rgb.rgb[(y * rgb.width) * 3 + x] = 128;
  }
  return RawEncoder(rgb).value();
}

class CountingObserver : public SchedulerObserver {
 public:
  void OnPreviewDropped(std::string_view reason) override {
    absl::MutexLock lock(&mu_);
    ++dropped_[std::string(reason)];
  }
  int dropped(const std::string& reason) const {
    absl::MutexLock lock(&mu_);
    auto it = dropped_.find(reason);
    return it == dropped_.end() ? 0 : it->second;
  }

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, int> dropped_;
};

std::unique_ptr<Scheduler> Make(FakeEngine& engine, SchedulerObserver* observer = nullptr) {
  SchedulerOptions o;  // the engine's own budget (FakeEngineOptions) is ample here
  auto s = Scheduler::Create(&engine, o, RawEncoder, observer);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

TEST(PreviewSchedulingTest, KPreviewsPerImageInOrderBeforeTheImagesEachAPrefixOfTheFinalTokens) {
  FakeEngineOptions eo;
  eo.token_grid = 8;
  eo.image_size = 16;
  eo.step_time = absl::Milliseconds(2);  // room for each preview's decode between preview points
  FakeEngine engine(eo);
  CountingObserver observer;
  auto s = Make(engine, &observer);
  SubmitOptions so;
  so.previews = 3;
  auto h = s->Submit(MakeRequest("a cat", 2, 9), so).value();
  std::vector<RequestEvent> events = CollectEvents(*h);
  ASSERT_NE(FindFinished(events), nullptr);
  ASSERT_TRUE(FindFinished(events)->status.ok()) << FindFinished(events)->status;
  const std::vector<int32_t> rows = {2, 4, 6};
  std::vector<const PreviewEvent*> previews;
  bool image_seen = false;
  for (const RequestEvent& e : events) {
    if (std::holds_alternative<ImageEvent>(e)) image_seen = true;
    if (const auto* p = std::get_if<PreviewEvent>(&e)) {
      EXPECT_FALSE(image_seen) << "a preview after an image";
      previews.push_back(p);
    }
  }
  ASSERT_EQ(previews.size(), 6u);  // 3 per image
  for (size_t i = 0; i < previews.size(); ++i) {
    const PreviewEvent& p = *previews[i];
    EXPECT_EQ(p.index, static_cast<int32_t>(i / 2));
    EXPECT_EQ(p.image, static_cast<int32_t>(i % 2));
    EXPECT_EQ(p.rows_done, rows[i / 2]);
    EXPECT_EQ(p.tokens_done, rows[i / 2] * 8);
    EXPECT_EQ(p.width, 16);
    EXPECT_EQ(p.encoded, ExpectedPreview(engine, 9, p.image, p.rows_done)) << "preview " << i;
  }
  EXPECT_EQ(observer.dropped("image_path_busy") + observer.dropped("client_slow"), 0);
}

TEST(PreviewSchedulingTest, TooManyPreviewsIsInvalidArgument) {
  FakeEngine engine;  // 4 token rows: at most 3 previews
  auto s = Make(engine);
  SubmitOptions so;
  so.previews = 4;
  absl::StatusOr<std::shared_ptr<RequestHandle>> h = s->Submit(MakeRequest("x"), so);
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(h.status().message().rfind("previews: must be in [0, 3]", 0), 0u) << h.status();
  so.previews = -1;
  EXPECT_FALSE(s->Submit(MakeRequest("x"), so).ok());
}

TEST(PreviewSchedulingTest, AClientThatHasNotTakenThePreviousPreviewMissesTheNext) {
  FakeEngineOptions eo;
  eo.token_grid = 8;
  eo.step_time = absl::Milliseconds(2);
  FakeEngine engine(eo);
  CountingObserver observer;
  auto s = Make(engine, &observer);
  SubmitOptions so;
  so.previews = 3;
  auto h = s->Submit(MakeRequest("slow reader", 1, 3), so).value();
  // Read nothing until the request is done.
  for (int i = 0; i < 5000 && !h->finished(); ++i) absl::SleepFor(absl::Milliseconds(2));
  ASSERT_TRUE(h->finished());
  std::vector<RequestEvent> events = CollectEvents(*h);
  int previews = 0;
  for (const RequestEvent& e : events) previews += std::holds_alternative<PreviewEvent>(e);
  EXPECT_EQ(previews, 1);  // only the first; the others found it still waiting
  EXPECT_EQ(observer.dropped("client_slow"), 2);
  EXPECT_TRUE(FindFinished(events)->status.ok());
}

// Decodes slowly and records how far the decode loop got meanwhile.
class SlowDecoder : public FakeEngine {
 public:
  using FakeEngine::FakeEngine;
  absl::StatusOr<std::vector<engine::RgbImage>> DecodeImages(const std::vector<std::vector<int32_t>>& grids) override {
    const int64_t before = steps();
    absl::SleepFor(absl::Milliseconds(150));
    const int64_t after = steps();
    if (first_.exchange(false)) steps_during_first_decode_.store(after - before);
    return FakeEngine::DecodeImages(grids);
  }
  std::atomic<int64_t> steps_during_first_decode_{-1};

 private:
  std::atomic<bool> first_{true};
};

TEST(PreviewSchedulingTest, ABusyImagePathDropsPreviewsAndTheDecodeLoopNeverWaits) {
  FakeEngineOptions eo;
  eo.token_grid = 8;
  eo.step_time = absl::Milliseconds(1);
  SlowDecoder engine(eo);
  CountingObserver observer;
  auto s = Make(engine, &observer);
  SubmitOptions so;
  so.previews = 3;
  auto h = s->Submit(MakeRequest("busy", 1, 5), so).value();
  std::vector<RequestEvent> events = CollectEvents(*h);
  ASSERT_TRUE(FindFinished(events)->status.ok());
  int previews = 0;
  for (const RequestEvent& e : events) previews += std::holds_alternative<PreviewEvent>(e);
  EXPECT_EQ(previews, 1);  // the first one; the others came while it was decoding
  EXPECT_EQ(observer.dropped("image_path_busy"), 2);
  // The loop kept sampling while the preview decoded (it only hands tokens over).
  EXPECT_GT(engine.steps_during_first_decode_.load(), 0);
}

}  // namespace
}  // namespace argen::scheduler
